// Host-side helpers of the CUDA backend (error checks, launch geometry) that .cu files can
// include: no fmt here (nvcc rejects its compile-time format checks), printf-style messages.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// Aborts with the location and a printf-style message, like CHECKF (invariants only a bug can
// break).
[[noreturn]] void FailAt(const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

#define LS_CUDA_REQUIRE(cond, ...)                                                   \
  do {                                                                               \
    if (!(cond)) ::lockstep::backend::cuda::FailAt(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define LS_CUDA_CHECK(expr)                                                             \
  do {                                                                                  \
    const cudaError_t ls_cuda_err_ = (expr);                                            \
    if (ls_cuda_err_ != cudaSuccess)                                                    \
      ::lockstep::backend::cuda::FailAt(__FILE__, __LINE__, "CUDA error %d (%s) in %s", \
                                        static_cast<int>(ls_cuda_err_),                 \
                                        cudaGetErrorString(ls_cuda_err_), #expr);       \
  } while (0)

// Checks the launch just made (configuration errors surface here, faults at the next sync).
#define LS_CUDA_LAUNCHED() LS_CUDA_CHECK(cudaGetLastError())

inline constexpr int kWarp = 32;

// Kernels not yet shown to pay on a GPU (session 13: norms that quantize their output, `norm`;
// the short-row expert GEMV, `narrow`) stay off unless LOCKSTEP_CUDA_UNVERIFIED is 1 (all) or
// names them (e.g. "norm,narrow"), so main's GPU path is what has been measured to help; their
// tests turn them on (docs/benchmarks.md, "session 13").
bool UnverifiedKernelOn(const char* name);

inline int CeilDiv(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

}  // namespace lockstep::backend::cuda

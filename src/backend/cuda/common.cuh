// Device helpers shared by the CUDA kernels: the one warp reduction every kernel uses (a fixed
// butterfly, so a sum's order never depends on the launch).
#pragma once

#include "backend/cuda/common.h"

namespace lockstep::backend::cuda {

// Sum over the 32 lanes of a warp by xor butterfly (16, 8, 4, 2, 1): every lane ends with the
// same value, and the order of additions is fixed by lane numbers alone.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Programmatic dependent launch: in a replayed step a kernel's blocks may start while the kernel
// before it still runs (cuda_backend_graphs.cpp). Every kernel calls this, in every thread,
// before it reads or writes memory that another kernel writes or reads: it returns once the
// kernels before it have finished and their writes are visible (at once outside such a launch).
// Each thread waits, so no kernel can finish before the ones it follows.
__device__ __forceinline__ void AwaitPriorKernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// quant/dot.cpp's RoundHalfAway (activation quantization, quant::PrepareRow): truncate, then
// step away from zero on a remainder of a half.
__device__ __forceinline__ int RoundHalfAway(float v) {
  const int t = __float2int_rz(v);
  const float f = __fsub_rn(v, __int2float_rn(t));
  return t + (f >= 0.5f) - (f <= -0.5f);
}

}  // namespace lockstep::backend::cuda

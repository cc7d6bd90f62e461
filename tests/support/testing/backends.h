// Test backends that break lockstep's rules on purpose, for negative controls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/quant.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep::testing {

// The CUDA backend on device 0 for a GPU test, or null with the reason there is none (the test
// shows it on its visible "SKIPPED (no CUDA device): ..." line).
inline std::unique_ptr<backend::Backend> CudaBackendOrWhyNot(std::string* why) {
#if LOCKSTEP_HAS_CUDA
  auto be = backend::CudaBackend::Create(0);
  if (be.ok()) return std::move(be).value();
  *why = std::string(be.status().message());
#else
  *why = "lockstep was built without the CUDA backend";
#endif
  return nullptr;
}

// A backend whose matmul sums in reverse order when a call carries more than one row: the kind
// of shape-dependent kernel choice lockstep forbids. Verify and prefill rows then differ in the
// last bits from single-row decode rows.
class ShapeDependentBackend : public backend::CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  // Every matmul entry point goes through the shape-dependent MatMul (the CPU backend's fused
  // MatMuls would otherwise keep Q/K/V and gate/up exact).
  void MatMuls(const backend::Tensor& x, std::span<const MatMulOut> outs) override {
    for (const MatMulOut& o : outs) MatMul(*o.w, x, o.y);
  }
  void MatMul(const backend::Weight& w, const backend::Tensor& x, backend::Tensor* y) override {
    if (x.rows() == 1) return CpuBackend::MatMul(w, x, y);
    std::vector<float> wrow(static_cast<size_t>(w.ne[0]));
    for (int64_t j = 0; j < w.n_rows(); ++j) {
      quant::DequantizeRow(w.type, w.row(j), wrow.data(), w.ne[0]);
      for (int64_t r = 0; r < x.rows(); ++r) {
        float s = 0.0f;
        for (int64_t i = w.ne[0] - 1; i >= 0; --i) s += wrow[i] * x.row(r)[i];
        y->row(r)[j] = s;
      }
    }
  }
};

#if LOCKSTEP_HAS_CUDA
// The GPU counterpart: a CUDA matmul that rescales its result by one part in 10^7 when a call
// carries several rows (MatMuls goes through it too: the base class runs them one by one).
class ShapeDependentCudaBackend : public backend::CudaBackend {
 public:
  using CudaBackend::CudaBackend;
  void MatMul(const backend::Weight& w, const backend::Tensor& x, backend::Tensor* y) override {
    CudaBackend::MatMul(w, x, y);
    if (x.rows() > 1) Scale(*y, 1.0f + 1.0e-7f, y);
  }
};
#endif

}  // namespace lockstep::testing

// CudaBackend's quantized copies of norm outputs: which norm outputs an integer matmul reads,
// the copy a norm writes of its output in that matmul's activation layout (when the "norm"
// kernel is on), and the activations a matmul takes: the copy while it is current, else x
// quantized into scratch. Any write to a tensor drops its copy.
#include <cuda_runtime.h>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/norm.h"
#include "core/check.h"

namespace lockstep::backend {

using namespace cuda;

// Norm outputs with a quantized copy: a handful per workspace (attention and MLP inputs, the
// router's and the experts' inputs, the output norm); past this, norms write no new copies.
constexpr size_t kMaxQuantCopies = 32;

void CudaBackend::Wrote(const void* p, size_t bytes) {
  const auto* lo = static_cast<const uint8_t*>(p);
  for (QuantCopy& c : quant_copies_) {
    if (c.rows < 0) continue;
    const auto* x = reinterpret_cast<const uint8_t*>(c.x);
    const size_t x_bytes = static_cast<size_t>(c.rows * c.cols) * sizeof(float);
    if (lo < x + x_bytes && x < lo + bytes) c.rows = -1;
  }
}

void CudaBackend::ForgetQuantCopies() {
  for (QuantCopy& c : quant_copies_) c.rows = -1;
}

bool CudaBackend::SizeQuantCopy(QuantCopy* c, int64_t rows) {
  const size_t bytes = ActivationBytes(c->block, rows, c->cols);
  if (c->bytes >= bytes) return true;
  if (capturing_) return false;  // no allocation inside a capture: the norm writes no copy
  c->buf.reset();
  c->buf = Allocate(bytes, "a norm's quantized output");
  c->bytes = bytes;
  ++scratch_generation_;  // captures naming the old buffer are stale
  return true;
}

NormQuant CudaBackend::NormQuantFor(const Tensor& y) {
  if (y.rows() == 0 || !cuda::UnverifiedKernelOn("norm")) return {};
  for (QuantCopy& c : quant_copies_) {
    if (c.x != y.data() || c.cols != y.cols()) continue;
    if (!CanQuantizeInNorm(y.cols(), c.block) || !SizeQuantCopy(&c, y.rows())) return {};
    return {c.block, c.buf.get()};
  }
  // A norm output not seen yet: noted, so that its first integer matmul records its block.
  if (quant_copies_.size() < kMaxQuantCopies) quant_copies_.push_back({y.data(), y.cols()});
  return {};
}

void CudaBackend::NormQuantMade(const Tensor& y, const NormQuant& q) {
  if (q.block == 0) return;
  for (QuantCopy& c : quant_copies_)
    if (c.x == y.data() && c.cols == y.cols() && c.block == q.block) c.rows = y.rows();
}

ActRows CudaBackend::IntInput(DType t, const Tensor& x) {
  const int block = IntActivationBlock(t);
  for (QuantCopy& c : quant_copies_) {
    if (c.x != x.data() || c.cols != x.cols()) continue;
    if (c.block == 0) {  // the norm writing x quantizes for this block from now on
      c.block = block;
      // Sized now, in the step's first (plain) run, so that its capture can use the copy.
      if (CanQuantizeInNorm(c.cols, block)) SizeQuantCopy(&c, x.rows());
    }
    if (c.block == block && c.rows == x.rows()) {
      ++quantized_in_norms_;
      return ActLayout(block, x.rows(), x.cols()).View(c.buf.get(), x.cols());
    }
    break;
  }
  return QuantizeActivations(t, x.data(), x.rows(), x.cols(), ActScratch(t, x.rows(), x.cols()),
                             stream_);
}

}  // namespace lockstep::backend

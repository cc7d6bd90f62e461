// CudaBackend's composite ops: the mixture-of-experts FFN (routing, gathered expert matmuls,
// fixed-order combination) and token selection (greedy on the device; sampled rows through
// sample::Select on the host, the same function the CPU backend runs).
#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/select.h"
#include "core/check.h"

namespace lockstep::backend {

using namespace cuda;

void CudaBackend::MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate,
                         const Weight* up, const Weight& down, const Weight* down_scale, int n_used,
                         Tensor* y) {
  const int64_t n_embd = x.cols(), rows = x.rows();
  const int n_expert = static_cast<int>(router_logits.cols());
  const int64_t n_ff = up ? gate.ne[1] : gate.ne[1] / 2;
  CHECK(gate.ne[0] == n_embd && gate.ne[2] == n_expert && down.ne[0] == n_ff);
  CHECK(down.ne[1] == n_embd && y->cols() == n_embd && n_used <= n_expert);
  if (down_scale) CHECK(down_scale->type == DType::F32 && down_scale->ne[0] == n_expert);
  Wrote(*y);
  const int64_t tasks = rows * n_used;
  auto* experts = static_cast<int32_t*>(Scratch(kMoeExperts, tasks * sizeof(int32_t)));
  auto* weights = static_cast<float*>(Scratch(kMoeWeights, tasks * sizeof(float)));
  auto* hidden = static_cast<float*>(Scratch(kMoeHidden, tasks * 2 * n_ff * sizeof(float)));
  auto* act = static_cast<float*>(Scratch(kMoeAct, tasks * n_ff * sizeof(float)));
  auto* out = static_cast<float*>(Scratch(kMoeOut, tasks * n_embd * sizeof(float)));
  cudaStream_t stream = stream_;
  LaunchMoeRoute(router_logits.data(), rows, n_expert, n_used,
                 down_scale ? static_cast<const float*>(down_scale->data) : nullptr, experts,
                 weights, stream);
  // Gate and up projections of every (row, chosen expert) task: [tasks, 2 n_ff], gate first.
  // Tasks of many rows on the integer path share one expert tile table, built once.
  // The experts' input rows quantized once for the gate and up projections (or taken from the
  // quantized copy its norm made).
  ActRows xq_rows{};
  DType xq_type = DType::F32;
  bool tiles_built = false;  // the first grouped matmul builds the table the others read
  const auto expert_matmul = [&](const Weight& w, int64_t k, int64_t n_out, const float* in,
                                 int64_t x_div, float* out_rows) {
    GatheredMatMul m{w.type,
                     w.data,
                     static_cast<int64_t>(w.row_bytes),
                     k,
                     n_out,
                     in,
                     x_div,
                     nullptr,
                     experts,
                     n_out,
                     tasks,
                     out_rows,
                     ActScratch(w.type, tasks / x_div, k)};
    if (HasIntegerPath(w.type) && tasks >= kMmaMinRows) {
      m.n_expert = n_expert;
      m.tiles = Scratch(kMoeTiles, ExpertTileBytes(tasks, n_expert));
      m.tiles_ready = std::exchange(tiles_built, true);
    }
    if (in == x.data() && HasIntegerPath(w.type) && rows > 0) {
      if (xq_type == DType::F32 || IntActivationBlock(xq_type) != IntActivationBlock(w.type))
        xq_rows = IntInput(w.type, x), xq_type = w.type;
      m.xq = &xq_rows;
    }
    LaunchGatheredMatMul(m, stream);
  };
  if (up) {
    expert_matmul(gate, n_embd, n_ff, x.data(), n_used, hidden);
    expert_matmul(*up, n_embd, n_ff, x.data(), n_used, hidden + tasks * n_ff);
    LaunchGeluMul(hidden, n_ff, 0, hidden + tasks * n_ff, n_ff, 0, n_ff, tasks, act, stream);
  } else {
    expert_matmul(gate, n_embd, 2 * n_ff, x.data(), n_used, hidden);
    LaunchGeluMul(hidden, 2 * n_ff, 0, hidden, 2 * n_ff, n_ff, n_ff, tasks, act, stream);
  }
  expert_matmul(down, n_ff, n_embd, act, 1, out);
  LaunchMoeCombine(out, weights, rows, n_used, n_embd, y->data(), stream);
}

void CudaBackend::SelectTokens(const Tensor& logits, std::span<const SampleRow> rows,
                               IntTensor* ids) {
  const int64_t n = static_cast<int64_t>(rows.size());
  CHECKF(n <= logits.rows() && n <= ids->size(), "select: {} rows for {} logit rows and {} ids", n,
         logits.rows(), ids->size());
  const int64_t n_vocab = logits.cols();
  // The device argmax serves greedy rows whose logits need no repeat penalty first; every other
  // row goes through sample::Select on the host, the CPU backend's function.
  auto on_device = [](const SampleRow& s) { return sample::IsArgmax(s.settings, s.recent); };
  greedy_rows_.clear();
  for (int64_t r = 0; r < n; ++r)
    if (on_device(rows[static_cast<size_t>(r)])) greedy_rows_.push_back(static_cast<int32_t>(r));
  const int64_t n_greedy = static_cast<int64_t>(greedy_rows_.size());
  if (n_greedy > 0) {
    // Row list uploaded once (it is also the output index: greedy row r writes ids[r]).
    auto* idx = static_cast<int32_t*>(Scratch(kSelectIdx, n_greedy * sizeof(int32_t)));
    void* scratch = Scratch(kSelectScratch, ArgmaxScratchBytes(n_vocab, n_greedy));
    CopyToDevice(idx, greedy_rows_.data(), n_greedy * sizeof(int32_t));
    LaunchArgmax(logits.data(), n_vocab, idx, idx, n_greedy, ids->data(), scratch, stream_);
  }
  if (n_greedy == n) return;
  sample_logits_.resize(static_cast<size_t>(n_vocab));
  for (int64_t r = 0; r < n; ++r) {
    const SampleRow& s = rows[static_cast<size_t>(r)];
    if (on_device(s)) continue;
    LS_CUDA_CHECK(cudaMemcpyAsync(sample_logits_.data(), logits.row(r), n_vocab * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
    Synchronize();
    const int32_t id =
        sample::Select(s.settings, s.position, sample_logits_, s.recent, &sampled_ids_);
    CopyToDevice(ids->data() + r, &id, sizeof(int32_t));
  }
}

}  // namespace lockstep::backend

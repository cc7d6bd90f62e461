// CPU mixture-of-experts FFN (Gemma 4 routing: softmax over all experts, top-k, renormalise,
// per-expert output scale). Selected experts are accumulated in ascending expert id. The expert
// matmuls run grouped by expert (moe_grouped.cpp) or, on the baseline path, one (row, expert)
// pair at a time in column chunks over the pool, so one decode token's experts run on all
// threads; each output element equals one DotRow either way, and the weighted sum keeps its
// fixed order.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/activations.h"
#include "backend/cpu/activation_rows.h"
#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "quant/quant.h"
#include "sample/sampler.h"

namespace lockstep::backend {
namespace {

// Top-k of probabilities into `idx`, ties broken by the lower expert id; sorted by expert id.
void TopK(const std::vector<float>& p, int k, std::vector<int>* idx) {
  idx->resize(p.size());
  std::iota(idx->begin(), idx->end(), 0);
  std::partial_sort(idx->begin(), idx->begin() + k, idx->end(),
                    [&](int a, int b) { return sample::RanksBefore(p.data(), a, b); });
  idx->resize(static_cast<size_t>(k));
  std::sort(idx->begin(), idx->end());
}

// Output columns per task: enough work to be worth waking a worker, and enough tasks that a
// single token's experts keep every thread busy.
constexpr int64_t kMoeChunk = 64;

int64_t Chunks(int64_t n) {
  return (n + kMoeChunk - 1) / kMoeChunk;
}

// Tasks per chunk so a thread gets at least ~64K multiply-adds (tiny experts stay on the
// caller: waking a worker would cost more than the work; the split never changes results).
int64_t Grain(int64_t work_per_task) {
  return std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, work_per_task));
}

}  // namespace

void CpuBackend::MoeRoute(const Tensor& x, const Tensor& router_logits, DType in_type, int n_used,
                          const float* scale, bool prepare) {
  const int n_expert = static_cast<int>(router_logits.cols());
  pool_.ParallelForWorker(x.rows(), 1, [&](int worker, int64_t b, int64_t e) {
    WorkerScratch& ws = worker_[static_cast<size_t>(worker)];
    std::vector<float>& p = ws.probs;
    for (int64_t r = b; r < e; ++r) {
      const float* lg = router_logits.row(r);
      const float mx = *std::max_element(lg, lg + n_expert);
      float sum = 0.0f;
      for (int i = 0; i < n_expert; ++i) sum += (p[i] = std::exp(lg[i] - mx));
      for (float& v : p) v /= sum;
      TopK(p, n_used, &ws.experts);
      float wsum = 0.0f;
      for (int ex : ws.experts) wsum += p[ex];
      for (int k = 0; k < n_used; ++k) {
        const int ex = ws.experts[static_cast<size_t>(k)];
        moe_.expert[r * n_used + k] = ex;
        moe_.weight[r * n_used + k] = p[ex] / wsum * scale[ex];
      }
      if (prepare) quant::PrepareRow(in_type, x.row(r), x.cols(), &moe_.xin[r]);
    }
  });
}

void CpuBackend::MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate,
                        const Weight* up, const Weight& down, const Weight* down_scale, int n_used,
                        Tensor* y) {
  const int64_t n_embd = x.cols();
  const int n_expert = static_cast<int>(router_logits.cols());
  const int64_t n_ff = up ? gate.ne[1] : gate.ne[1] / 2;
  CHECK(gate.ne[0] == n_embd && gate.ne[2] == n_expert && down.ne[0] == n_ff);
  CHECK(down.ne[1] == n_embd && y->cols() == n_embd && n_used <= n_expert);
  CHECK(!up || up->type == gate.type);  // one prepared input serves both
  moe_scale_.assign(static_cast<size_t>(n_expert), 1.0f);
  if (down_scale) WeightRowF32(*down_scale, 0, moe_scale_.data());
  const MoeShape sh{x.rows(), x.rows() * n_used, n_embd, n_ff, n_expert, n_used};
  // The grouped path serves every row count (one decode row included: its experts' column
  // blocks still spread over the pool); the pair path stays as the benchmarks' baseline.
  const bool grouped = quant_tiles_ && moe_grouped_;
  MoeBuffers(sh, grouped);
  MoeRoute(x, router_logits, gate.type, n_used, moe_scale_.data(), !grouped);
  if (grouped) {
    MoeGrouped(x, sh, gate, up, down);
    MoeCombine(sh, moe_.pos.data(), y);
  } else {
    MoePairs(sh, gate, up, down);
    MoeCombine(sh, nullptr, y);
  }
}

void CpuBackend::MoePairs(const MoeShape& sh, const Weight& gate, const Weight* up,
                          const Weight& down) {
  const int64_t n_embd = sh.n_embd, n_ff = sh.n_ff, slots = sh.slots;
  const int n_used = sh.n_used;
  // Gate and up rows of every (row, expert) pair, in column chunks.
  const int64_t ff_chunks = Chunks(n_ff);
  pool_.ParallelFor(slots * ff_chunks, Grain(2 * kMoeChunk * n_embd), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t s = t / ff_chunks, j0 = t % ff_chunks * kMoeChunk;
      const int64_t ex = moe_.expert[s], base = ex * gate.ne[1];
      const quant::PreparedRow& xin = moe_.xin[s / n_used];
      float* hid = moe_.hid.data() + s * 2 * n_ff;
      for (int64_t j = j0; j < std::min(n_ff, j0 + kMoeChunk); ++j) {
        hid[j] = quant::DotRow(gate.row(base + j), xin);
        hid[n_ff + j] = up ? quant::DotRow(up->row(ex * n_ff + j), xin)
                           : quant::DotRow(gate.row(base + n_ff + j), xin);
      }
    }
  });
  // The GELU product of each pair, prepared for its down rows.
  pool_.ParallelForWorker(slots, Grain(16 * n_ff), [&](int worker, int64_t b, int64_t e) {
    float* act = worker_[static_cast<size_t>(worker)].act.data();
    for (int64_t s = b; s < e; ++s) {
      const float* hid = moe_.hid.data() + s * 2 * n_ff;
      GeluMulRow(hid, hid + n_ff, act, n_ff);
      quant::PrepareRow(down.type, act, n_ff, &moe_.xact[s]);
    }
  });
  const int64_t d_chunks = Chunks(n_embd);
  pool_.ParallelFor(slots * d_chunks, Grain(kMoeChunk * n_ff), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t s = t / d_chunks, j0 = t % d_chunks * kMoeChunk, ex = moe_.expert[s];
      float* d = moe_.down.data() + s * n_embd;
      for (int64_t j = j0; j < std::min(n_embd, j0 + kMoeChunk); ++j)
        d[j] = quant::DotRow(down.row(ex * n_embd + j), moe_.xact[s]);
    }
  });
}

void CpuBackend::MoeCombine(const MoeShape& sh, const int64_t* pos, Tensor* y) {
  // The weighted sum in ascending expert id, one row per task.
  const int64_t n_embd = sh.n_embd;
  const int n_used = sh.n_used;
  pool_.ParallelFor(sh.rows, Grain(n_used * n_embd), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* out = y->row(r);
      std::fill(out, out + n_embd, 0.0f);
      for (int k = 0; k < n_used; ++k) {
        const int64_t s = r * n_used + k;
        const float w = moe_.weight[s];
        const float* d = moe_.down.data() + (pos ? pos[s] : s) * n_embd;
        for (int64_t j = 0; j < n_embd; ++j) out[j] += w * d[j];
      }
    }
  });
}

void CpuBackend::MoeBuffers(const MoeShape& sh, bool grouped) {
  const size_t slots = static_cast<size_t>(sh.slots), rows = static_cast<size_t>(sh.rows);
  moe_.expert.resize(slots);
  moe_.weight.resize(slots);
  moe_.hid.resize(slots * 2 * static_cast<size_t>(sh.n_ff));
  moe_.down.resize(slots * static_cast<size_t>(sh.n_embd));
  if (moe_.xin.size() < rows) moe_.xin.resize(rows);
  if (moe_.xact.size() < slots) moe_.xact.resize(slots);
  if (grouped) {
    moe_.order.resize(slots);
    moe_.pos.resize(slots);
    moe_.start.resize(static_cast<size_t>(sh.n_expert) + 1);
    moe_.active.reserve(static_cast<size_t>(sh.n_expert));
    if (moe_.xs.size() < slots) moe_.xs.resize(slots);
  }
  // Size every buffer here, on the calling thread; the workers only reuse them. 2n + 64 bytes
  // bound every prepared activation format (int8 values plus per-block scales and sums).
  const size_t widest = static_cast<size_t>(std::max(sh.n_embd, sh.n_ff));
  for (auto* set : {&moe_.xin, &moe_.xact, &moe_.xs})
    for (quant::PreparedRow& pr : *set) {
      pr.f32.reserve(widest);
      pr.q.reserve(2 * widest + 64);
    }
  for (WorkerScratch& ws : worker_) {
    ws.act.resize(static_cast<size_t>(sh.n_ff));
    ws.probs.resize(static_cast<size_t>(sh.n_expert));
    ws.experts.reserve(static_cast<size_t>(sh.n_expert));
  }
}

}  // namespace lockstep::backend

// CPU mixture-of-experts FFN (Gemma 4 routing: softmax over all experts, top-k, renormalise,
// per-expert output scale). Selected experts are accumulated in ascending expert id.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/activations.h"
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

}  // namespace

void CpuBackend::MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate,
                        const Weight* up, const Weight& down, const Weight* down_scale, int n_used,
                        Tensor* y) {
  const int64_t n_embd = x.cols();
  const int n_expert = static_cast<int>(router_logits.cols());
  const int64_t n_ff = up ? gate.ne[1] : gate.ne[1] / 2;
  CHECK(gate.ne[0] == n_embd && gate.ne[2] == n_expert && down.ne[0] == n_ff);
  CHECK(down.ne[1] == n_embd && y->cols() == n_embd && n_used <= n_expert);
  moe_scale_.assign(static_cast<size_t>(n_expert), 1.0f);
  if (down_scale) WeightRowF32(*down_scale, 0, moe_scale_.data());
  const float* scale = moe_scale_.data();
  // Size every worker's scratch here, on the calling thread; the workers only reuse it.
  for (WorkerScratch& ws : worker_) {
    ws.hid.resize(static_cast<size_t>(2 * n_ff));
    ws.act.resize(static_cast<size_t>(n_ff));
    ws.probs.resize(static_cast<size_t>(n_expert));
    ws.experts.reserve(static_cast<size_t>(n_expert));
    // Prepared rows too: a worker that first runs an expert row in a later step must not grow
    // them there (which worker takes a row depends on timing). 2n + 64 bytes bound every
    // activation format (int8 values plus per-block scales and sums).
    const size_t widest = static_cast<size_t>(std::max(n_embd, n_ff));
    for (quant::PreparedRow* pr : {&ws.xin, &ws.xact}) {
      pr->f32.reserve(widest);
      pr->q.reserve(2 * widest + 64);
    }
  }
  pool_.ParallelForWorker(x.rows(), 1, [&](int worker, int64_t b, int64_t e) {
    WorkerScratch& ws = worker_[static_cast<size_t>(worker)];
    std::vector<float>& p = ws.probs;
    float* hid = ws.hid.data();
    float* act = ws.act.data();
    quant::PreparedRow& xin = ws.xin;
    quant::PreparedRow& xact = ws.xact;
    for (int64_t r = b; r < e; ++r) {
      const float* lg = router_logits.row(r);
      const float mx = *std::max_element(lg, lg + n_expert);
      float sum = 0.0f;
      for (int i = 0; i < n_expert; ++i) sum += (p[i] = std::exp(lg[i] - mx));
      for (float& v : p) v /= sum;
      TopK(p, n_used, &ws.experts);
      const std::vector<int>& sel = ws.experts;
      float wsum = 0.0f;
      for (int ex : sel) wsum += p[ex];
      float* out = y->row(r);
      std::fill(out, out + n_embd, 0.0f);
      quant::PrepareRow(gate.type, x.row(r), n_embd, &xin);
      for (int ex : sel) {
        const int64_t base = static_cast<int64_t>(ex) * gate.ne[1];
        for (int64_t j = 0; j < n_ff; ++j) {
          hid[j] = quant::DotRow(gate.row(base + j), xin);
          hid[n_ff + j] = up ? quant::DotRow(up->row(static_cast<int64_t>(ex) * n_ff + j), xin)
                             : quant::DotRow(gate.row(base + n_ff + j), xin);
        }
        for (int64_t j = 0; j < n_ff; ++j) act[j] = GeluTanh(hid[j]) * hid[n_ff + j];
        quant::PrepareRow(down.type, act, n_ff, &xact);
        const float w = p[ex] / wsum * scale[ex];
        for (int64_t j = 0; j < n_embd; ++j)
          out[j] += w * quant::DotRow(down.row(static_cast<int64_t>(ex) * n_embd + j), xact);
      }
    }
  });
}

}  // namespace lockstep::backend

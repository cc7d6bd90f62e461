// CPU attention and KV writes. A query row's softmax runs over its own sequence's keys in
// ascending position order, so the result is the same whether the row arrives alone, in a
// prefill chunk or in a verify batch.
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "kv/kv_store.h"
#include "quant/quant.h"

namespace lockstep::backend {

void CpuBackend::KvWrite(KvStore* kv, int layer, const Tensor& k, const Tensor& v,
                         const RowInfo& rows) {
  Tensor& kd = kv->k(layer);
  Tensor& vd = kv->v(layer);
  CHECK(!kd.empty() && k.cols() == kd.cols() && v.cols() == vd.cols());
  for (int64_t r = 0; r < k.rows(); ++r) {
    CHECKF(rows.pos[r] >= 0 && rows.pos[r] < kv->n_ctx(), "position {} outside context {}",
           rows.pos[r], kv->n_ctx());
    CHECKF(rows.seq[r] >= 0 && rows.seq[r] < kv->n_seq(), "sequence slot {} outside {}",
           rows.seq[r], kv->n_seq());
    const int64_t dst = kv->row_index(rows.seq[r], rows.pos[r]);
    std::memcpy(kd.row(dst), k.row(r), static_cast<size_t>(k.cols()) * sizeof(float));
    std::memcpy(vd.row(dst), v.row(r), static_cast<size_t>(v.cols()) * sizeof(float));
  }
}

void CpuBackend::Attention(const Tensor& q, const KvStore& kv, int layer, int n_head, int n_head_kv,
                           int head_dim, int window, bool include_self, const RowInfo& rows,
                           Tensor* out) {
  const Tensor& kd = kv.k(layer);
  const Tensor& vd = kv.v(layer);
  CHECK(!kd.empty() && q.cols() == static_cast<int64_t>(n_head) * head_dim);
  CHECK(kd.cols() == static_cast<int64_t>(n_head_kv) * head_dim && out->cols() == q.cols());
  const int group = n_head / n_head_kv;
  // Parallelise only when a (row, head) item list holds enough work to pay for a wake-up.
  int64_t work = 0;
  for (int64_t r = 0; r < q.rows(); ++r) work += static_cast<int64_t>(rows.pos[r] + 1) * head_dim;
  work *= n_head;
  const int64_t items = q.rows() * n_head;
  const int64_t grain = work < (1 << 15) ? items : 1;
  pool_.ParallelFor(items, grain, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(head_dim));
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / n_head;
      const int h = static_cast<int>(i % n_head);
      const int hk = h / group;
      const int lo = window > 0 ? std::max(0, rows.pos[r] - window + 1) : 0;
      const int p = include_self ? rows.pos[r] : rows.pos[r] - 1;  // last key read
      CHECK(p >= lo);
      const float* qh = q.row(r) + static_cast<int64_t>(h) * head_dim;
      scores.resize(static_cast<size_t>(p - lo + 1));
      float mx = -std::numeric_limits<float>::infinity();
      // Scores four keys at a time (four dot chains in flight), each in DotF32's order.
      for (int t0 = lo; t0 <= p; t0 += quant::kMaxDotCols) {
        const int nk = std::min(quant::kMaxDotCols, p - t0 + 1);
        const float* ks[quant::kMaxDotCols];
        for (int c = 0; c < nk; ++c)
          ks[c] = kd.row(kv.row_index(rows.seq[r], t0 + c)) + static_cast<int64_t>(hk) * head_dim;
        quant::DotF32Cols(ks, nk, qh, head_dim, &scores[t0 - lo]);
      }
      for (float s : scores) mx = std::max(mx, s);
      float sum = 0.0f;
      for (float& s : scores) {
        s = std::exp(s - mx);
        sum += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int t = lo; t <= p; ++t) {
        const float* vh =
            vd.row(kv.row_index(rows.seq[r], t)) + static_cast<int64_t>(hk) * head_dim;
        const float pr = scores[t - lo];
        for (int d = 0; d < head_dim; ++d) acc[d] += pr * vh[d];
      }
      float* o = out->row(r) + static_cast<int64_t>(h) * head_dim;
      const float inv = 1.0f / sum;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[d] * inv;
    }
  });
}

}  // namespace lockstep::backend

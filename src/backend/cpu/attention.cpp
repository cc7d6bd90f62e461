// CPU attention and KV writes. A query row's softmax runs over its own sequence's keys in
// ascending position order, so the result is the same whether the row arrives alone, in a
// prefill chunk or in a verify batch, and whatever storage row (ring slot, paged block) holds
// each key.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/half.h"
#include "quant/quant.h"

namespace lockstep::backend {
namespace {

size_t ElemBytes(DType t) {
  return t == DType::F32 ? sizeof(float) : sizeof(uint16_t);
}

// Stores one f32 row in the cache's element type (F16 and BF16 round to nearest even).
void StoreRow(void* base, DType t, int64_t width, int64_t row, const float* src) {
  uint8_t* dst = static_cast<uint8_t*>(base) + row * width * static_cast<int64_t>(ElemBytes(t));
  if (t == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(width) * sizeof(float));
    return;
  }
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  if (t == DType::F16)
    for (int64_t i = 0; i < width; ++i) d[i] = FloatToHalf(src[i]);
  else
    for (int64_t i = 0; i < width; ++i) d[i] = FloatToBF16(src[i]);
}

// One head slice of a cache row as f32: F32 storage is read in place; F16/BF16 is widened
// (exactly) into `scratch`, so every element type reaches the same arithmetic in one order.
const float* HeadF32(const void* base, DType t, int64_t width, int64_t row, int64_t col, int n,
                     float* scratch) {
  const int64_t at = row * width + col;
  if (t == DType::F32) return static_cast<const float*>(base) + at;
  const uint16_t* s = static_cast<const uint16_t*>(base) + at;
  if (t == DType::F16)
    for (int i = 0; i < n; ++i) scratch[i] = HalfToFloat(s[i]);
  else
    for (int i = 0; i < n; ++i) scratch[i] = BF16ToFloat(s[i]);
  return scratch;
}

// Value rows added per AddWeightedRows call.
constexpr int kValueTile = 16;

bool CacheType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace

void CpuBackend::KvWrite(const KvLayerView& kv, const Tensor& k, const Tensor& v,
                         const RowInfo& rows) {
  CHECK(kv.k && kv.v && CacheType(kv.type_k) && CacheType(kv.type_v));
  CHECK(k.cols() == kv.k_width && v.cols() == kv.v_width);
  for (int64_t r = 0; r < k.rows(); ++r) {
    CHECKF(rows.pos[r] >= 0 && rows.pos[r] < kv.n_ctx, "position {} outside context {}",
           rows.pos[r], kv.n_ctx);
    CHECKF(rows.seq[r] >= 0 && rows.seq[r] < kv.n_seq, "sequence slot {} outside {}", rows.seq[r],
           kv.n_seq);
    const int64_t dst = kv.Row(rows.seq[r], rows.pos[r]);
    CHECKF(dst >= 0, "slot {} position {}: no cache block (PrepareWrite not called)", rows.seq[r],
           rows.pos[r]);
    StoreRow(kv.k, kv.type_k, kv.k_width, dst, k.row(r));
    StoreRow(kv.v, kv.type_v, kv.v_width, dst, v.row(r));
  }
}

void CpuBackend::Attention(const Tensor& q, const KvLayerView& kv, int n_head, int n_head_kv,
                           int head_dim, int window, bool include_self, const RowInfo& rows,
                           Tensor* out) {
  CHECK(kv.k && kv.v && q.cols() == static_cast<int64_t>(n_head) * head_dim);
  CHECK(kv.k_width == static_cast<int64_t>(n_head_kv) * head_dim && kv.v_width == kv.k_width);
  CHECK(out->cols() == q.cols());
  const int group = n_head / n_head_kv;
  // Parallelise only when a (row, head) item list holds enough work to pay for a wake-up.
  int64_t work = 0;
  int max_keys = 1;
  for (int64_t r = 0; r < q.rows(); ++r) {
    work += static_cast<int64_t>(rows.pos[r] + 1) * head_dim;
    const int lo = window > 0 ? std::max(0, rows.pos[r] - window + 1) : 0;
    max_keys = std::max(max_keys, rows.pos[r] - lo + 1);
  }
  // A ring holds only its last `ring` positions: a read spanning more would see overwritten
  // rows.
  CHECKF(kv.ring == 0 || kv.ring >= kv.n_ctx || (window > 0 && max_keys <= kv.ring),
         "attention reads {} keys from a ring of {}", max_keys, kv.ring);
  work *= n_head;
  const int64_t items = q.rows() * n_head;
  const int64_t grain = work < (1 << 15) ? items : 1;
  // Per worker: scores, accumulator, up to kValueTile converted keys or values.
  static_assert(kValueTile >= quant::kMaxDotCols);
  const size_t need = static_cast<size_t>(max_keys) +
                      static_cast<size_t>(1 + kValueTile) * static_cast<size_t>(head_dim);
  for (auto& s : attn_scratch_)
    if (s.size() < need) s.resize(need);
  const auto body = [&](int worker, int64_t b, int64_t e) {
    float* scores = attn_scratch_[static_cast<size_t>(worker)].data();
    float* acc = scores + max_keys;
    float* kbuf = acc + head_dim;  // kValueTile rows of head_dim: converted keys, then values
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / n_head;
      const int h = static_cast<int>(i % n_head);
      const int64_t col = static_cast<int64_t>(h / group) * head_dim;
      const int seq = rows.seq[r];
      const int lo = window > 0 ? std::max(0, rows.pos[r] - window + 1) : 0;
      const int p = include_self ? rows.pos[r] : rows.pos[r] - 1;  // last key read
      CHECK(p >= lo);
      const float* qh = q.row(r) + static_cast<int64_t>(h) * head_dim;
      const int n_keys = p - lo + 1;
      // Scores four keys at a time (four dot chains in flight), each in DotF32's order.
      for (int t0 = lo; t0 <= p; t0 += quant::kMaxDotCols) {
        const int nk = std::min(quant::kMaxDotCols, p - t0 + 1);
        const float* ks[quant::kMaxDotCols];
        for (int c = 0; c < nk; ++c) {
          const int64_t row = kv.Row(seq, t0 + c);
          CHECK(row >= 0);
          ks[c] = HeadF32(kv.k, kv.type_k, kv.k_width, row, col, head_dim,
                          kbuf + static_cast<int64_t>(c) * head_dim);
        }
        quant::DotF32Cols(ks, nk, qh, head_dim, &scores[t0 - lo]);
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n_keys; ++j) mx = std::max(mx, scores[j]);
      float sum = 0.0f;
      for (int j = 0; j < n_keys; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        sum += scores[j];
      }
      // acc[d] += p_t * v_t[d] in ascending t, kValueTile value rows per pass (the sum stays in
      // registers across a tile; the order per element is the same).
      std::fill(acc, acc + head_dim, 0.0f);
      for (int t0 = lo; t0 <= p; t0 += kValueTile) {
        const int nv = std::min(kValueTile, p - t0 + 1);
        const float* vs[kValueTile];
        for (int c = 0; c < nv; ++c)
          vs[c] = HeadF32(kv.v, kv.type_v, kv.v_width, kv.Row(seq, t0 + c), col, head_dim,
                          kbuf + static_cast<int64_t>(c) * head_dim);
        quant::AddWeightedRows(vs, &scores[t0 - lo], nv, head_dim, acc);
      }
      float* o = out->row(r) + static_cast<int64_t>(h) * head_dim;
      const float inv = 1.0f / sum;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[d] * inv;
    }
  };
  // A reference_wrapper fits std::function's inline storage: no allocation per call.
  pool_.ParallelForWorker(items, grain, body);
}

}  // namespace lockstep::backend

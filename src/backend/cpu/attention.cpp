// CPU attention and KV writes. A query row's softmax runs over its own sequence's keys in
// ascending position order, so the result is the same whether the row arrives alone, in a
// prefill chunk or in a verify batch, and whatever storage row (ring slot, paged block) holds
// each key.
#include <algorithm>
#include <cstring>
#include <functional>

#include "backend/cpu/activation_rows.h"
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
  quant::WidenHalfRow(t, static_cast<const uint16_t*>(base) + at, scratch, n);
  return scratch;
}

// Value rows added per AddWeightedRows call.
constexpr int kValueTile = 16;

// How far ahead of the keys (and values) in use their head slices are prefetched. A decode
// step's cache rows come from DRAM (the weights stream through the last-level cache between two
// reads), and the score and value loops, a few dozen cycles of arithmetic a key, keep too few
// misses in flight on their own. One layer's call at 200 keys after a 40 MB read, 1 thread,
// medians of 200 alternating calls: 16 rows 363 -> 294 us (head width 128: 590 -> 404), 4 rows
// 92 -> 76, 1 row 23 -> 20. F32 caches only: with an F16 cache (rows widened on the way, half
// the lines) it measured slower (4 rows 141 -> 167 us). The stream goes on from an item's last
// keys into its first values, and each item starts the next one's first keys: 16 rows at 48
// keys 83.6 -> 75.3 us, at 200 keys 234 -> 227 us.
constexpr int kPrefetchAhead = 8;

bool CacheType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// Queries one attention work item holds (rows x heads of its KV heads). Every item streams its
// keys and values through the cache once: 16 queries share that read (a d17b 512-token
// prefill's attention: 237 ms at 8, 208 ms at 16 and at 32, 2 threads).
constexpr int kBlockQueries = 16;
// KV heads one item may cover: a decode row whose heads all fit in kBlockQueries reads its
// cache rows whole (every KV head's slice in one pass), one contiguous stream per sequence
// instead of one slice every row's width.
constexpr int kMaxItemKvHeads = 8;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The first key a query at `pos` reads: its sliding window's start (0 without a window).
int WindowStart(int pos, int window) {
  return window > 0 ? std::max(0, pos - window + 1) : 0;
}

// The queries of one work item: each reads keys [lo, last] of the item's sequence. They go slice
// by slice: queries [s * per_slice, (s + 1) * per_slice) read KV head s of the item's n_slices
// (consecutive from the item's first).
struct AttentionQueries {
  int n = 0;
  int n_slices = 1, per_slice = 0;
  int lo[kBlockQueries], last[kBlockQueries];
  const float* q[kBlockQueries];
  float* scores[kBlockQueries];  // scores[j][t - lo[j]]
  float* acc[kBlockQueries];     // head_dim
  float* out[kBlockQueries];     // head_dim
};

// Key or value rows of one tile, as f32 head slices: rows[s][c] is key t0 + c in slice s.
using TileRows = const float* [kMaxItemKvHeads][kValueTile];

// The cache rows one work item reads: keys [first, end) of one sequence, its n_slices KV heads'
// slices from column `col`, F16/BF16 rows widened into `rows_buf` (n_slices x kValueTile rows
// of head_dim).
struct ItemRows {
  const KvLayerView& kv;
  int seq, first, end, n_slices, head_dim;
  int64_t col;
  float* rows_buf;

  // Brings the slices of keys [t0, min(t0 + n, end)) into the first-level cache. A prefetch
  // never faults; rows without a block (-1) are skipped all the same.
  void Prefetch(const void* base, DType type, int64_t width, int t0, int n) const {
    n = std::min(n, end - t0);
    if (n <= 0 || type != DType::F32) return;
    int64_t rows[kValueTile];
    kv.Rows(seq, t0, n, rows);
    const int64_t elem = static_cast<int64_t>(ElemBytes(type));
    const int64_t bytes = static_cast<int64_t>(n_slices) * head_dim * elem;
    for (int c = 0; c < n; ++c) {
      if (rows[c] < 0) continue;
      const char* p = static_cast<const char*>(base) + (rows[c] * width + col) * elem;
      for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
    }
  }
  // The slices of keys [t0, t0 + n) as f32 rows, and a prefetch of the ones kPrefetchAhead on.
  void Fetch(const void* base, DType type, int64_t width, int t0, int n, TileRows& ptrs) const {
    Prefetch(base, type, width, t0 + kPrefetchAhead, n);
    int64_t rows[kValueTile];
    kv.Rows(seq, t0, n, rows);
    for (int c = 0; c < n; ++c) {
      CHECK(rows[c] >= 0);
      for (int sl = 0; sl < n_slices; ++sl)
        ptrs[sl][c] = HeadF32(base, type, width, rows[c], col + int64_t{sl} * head_dim, head_dim,
                              rows_buf + static_cast<int64_t>(sl * kValueTile + c) * head_dim);
    }
  }
};

// The part of keys [t0, t0 + n) query j reads: [a, z) (empty when a >= z).
std::pair<int, int> Span(const AttentionQueries& qs, int j, int t0, int n) {
  return {std::max(t0, qs.lo[j]), std::min(t0 + n, qs.last[j] + 1)};
}

// Every query's scores, four keys at a time (four dot chains in flight), each in DotF32's
// order. Queries that read all four keys go through DotF32Block together (the keys loaded
// once); the others (the block's edges) alone. The same bits either way.
void Scores(const ItemRows& item, const AttentionQueries& qs) {
  const KvLayerView& kv = item.kv;
  TileRows tile;
  for (int t0 = item.first; t0 < item.end; t0 += quant::kMaxDotCols) {
    const int nk = std::min(quant::kMaxDotCols, item.end - t0);
    item.Fetch(kv.k, kv.type_k, kv.k_width, t0, nk, tile);
    // Past the last key the prefetch goes on with the first values, which come next.
    const int v0 = item.first + std::max(0, t0 + kPrefetchAhead - item.end);
    const int v1 = item.first + (t0 + kPrefetchAhead + nk - item.end);
    if (v1 > v0) item.Prefetch(kv.v, kv.type_v, kv.v_width, v0, v1 - v0);
    for (int sl = 0; sl < qs.n_slices; ++sl) {
      const float* whole_q[kBlockQueries];
      float* whole_out[kBlockQueries];
      int n_whole = 0;
      for (int j = sl * qs.per_slice; j < (sl + 1) * qs.per_slice; ++j) {
        const auto [a, z] = Span(qs, j, t0, nk);
        if (a == t0 && z - a == quant::kMaxDotCols) {
          whole_q[n_whole] = qs.q[j];
          whole_out[n_whole++] = qs.scores[j] + (a - qs.lo[j]);
        } else if (a < z) {
          quant::DotF32Cols(tile[sl] + (a - t0), z - a, qs.q[j], item.head_dim,
                            qs.scores[j] + (a - qs.lo[j]));
        }
      }
      for (int w = 0; w < n_whole; w += quant::kMaxDotQueries)
        quant::DotF32Block(tile[sl], whole_q + w, std::min(quant::kMaxDotQueries, n_whole - w),
                           item.head_dim, whole_out + w);
    }
  }
}

// acc[d] += p_t * v_t[d] in ascending t, kValueTile value rows per pass (the sums stay in
// registers across a tile; the order per element is the same). Queries that read the whole
// tile go through AddWeightedRows together (each value row loaded once for all of them); the
// block's edges alone. The same bits either way.
void WeightedValues(const ItemRows& item, const AttentionQueries& qs) {
  const KvLayerView& kv = item.kv;
  TileRows tile;
  for (int t0 = item.first; t0 < item.end; t0 += kValueTile) {
    const int nv = std::min(kValueTile, item.end - t0);
    item.Fetch(kv.v, kv.type_v, kv.v_width, t0, nv, tile);
    for (int sl = 0; sl < qs.n_slices; ++sl) {
      const float* whole_w[kBlockQueries];
      float* whole_acc[kBlockQueries];
      int n_whole = 0;
      for (int j = sl * qs.per_slice; j < (sl + 1) * qs.per_slice; ++j) {
        const auto [a, z] = Span(qs, j, t0, nv);
        const float* w = qs.scores[j] + (a - qs.lo[j]);
        if (a == t0 && z - a == nv) {
          whole_w[n_whole] = w;
          whole_acc[n_whole++] = qs.acc[j];
        } else if (a < z) {
          quant::AddWeightedRows(tile[sl] + (a - t0), z - a, &w, 1, item.head_dim, &qs.acc[j]);
        }
      }
      for (int g = 0; g < n_whole; g += quant::kMaxWeightedAccs)
        quant::AddWeightedRows(tile[sl], nv, whole_w + g,
                               std::min(quant::kMaxWeightedAccs, n_whole - g), item.head_dim,
                               whole_acc + g);
    }
  }
}

// Each query's softmax(q k^T) v over its own keys, in DotF32's order per score, SoftmaxRow's
// weights and their sum (DotF32's order, from the query's first key), ascending key order for
// the weighted value rows: the arithmetic a query gets alone, only the key and value rows are
// shared. The queries' key ranges together form one range (consecutive positions of one
// sequence). `col`: the first slice's first column. `rows_buf`: n_slices x kValueTile rows of
// head_dim for converted keys or values.
void AttendBlock(const KvLayerView& kv, int seq, int64_t col, int head_dim,
                 const AttentionQueries& qs, float* rows_buf) {
  ItemRows item{kv, seq, qs.lo[0], qs.last[0] + 1, qs.n_slices, head_dim, col, rows_buf};
  for (int j = 1; j < qs.n; ++j) {
    item.first = std::min(item.first, qs.lo[j]);
    item.end = std::max(item.end, qs.last[j] + 1);
  }
  Scores(item, qs);
  float sum[kBlockQueries];
  for (int j = 0; j < qs.n; ++j) {
    sum[j] = SoftmaxRow(qs.scores[j], qs.last[j] - qs.lo[j] + 1);
    std::fill(qs.acc[j], qs.acc[j] + head_dim, 0.0f);
  }
  WeightedValues(item, qs);
  for (int j = 0; j < qs.n; ++j) {
    const float inv = 1.0f / sum[j];
    for (int d = 0; d < head_dim; ++d) qs.out[j][d] = qs.acc[j][d] * inv;
  }
}

// How one Attention call's queries split into work items. An item: `kv_per_item` KV heads, one
// row block and `heads_per_item` of the heads sharing each KV head (a block's heads split into
// `parts`). Its queries read the same keys and values, so each key or value row is converted and
// brought into the cache once for all of them. A block's heads are split when they exceed
// kBlockQueries, or when there are too few blocks (decode of one sequence) to give each worker
// an item. An item takes all KV heads when every block's queries fit one item and there are
// blocks enough for the workers (a decode step of several sequences): it then reads whole cache
// rows, consecutive in memory, instead of one head's slice every row width. A 16-row step at
// 200 keys, 2 threads, median of 7 alternating runs: attention 2.76 -> 2.51 ms. `want` was
// two items a worker: one row's heads were then split in two, and both halves read the same
// rows, often on two threads (one row at 200 keys, 2 threads, 200 alternating calls after a
// 40 MB read: 27.7 -> 22.4 us; two rows 49.5 -> 35.3).
struct AttnPlan {
  int heads_per_item = 1, parts = 1, kv_per_item = 1, max_queries = 1;
  int64_t items_per_block = 1;
};

AttnPlan PlanItems(int n_head, int n_head_kv, int64_t n_blocks, int64_t widest_block,
                   int64_t want) {
  AttnPlan p;
  const int group = n_head / n_head_kv;
  int parts = static_cast<int>(CeilDiv(group, kBlockQueries));
  if (n_blocks * n_head_kv < want)
    parts = std::max(
        parts, static_cast<int>(std::min<int64_t>(group, CeilDiv(want, n_blocks * n_head_kv))));
  p.heads_per_item = static_cast<int>(CeilDiv(group, parts));
  p.parts = static_cast<int>(CeilDiv(group, p.heads_per_item));
  const bool whole_rows = p.parts == 1 && n_head_kv <= kMaxItemKvHeads && n_blocks >= want &&
                          widest_block * n_head <= kBlockQueries;
  p.kv_per_item = whole_rows ? n_head_kv : 1;
  p.max_queries = static_cast<int>(widest_block) * p.heads_per_item * p.kv_per_item;
  p.items_per_block = int64_t{n_head_kv / p.kv_per_item} * p.parts;
  return p;
}

// Splits the rows into blocks of up to block_rows consecutive positions of one sequence (so the
// keys a block reads form one range and every key in it is needed): (first row, rows) pairs.
// Returns the widest block's rows.
int64_t RowBlocks(const RowInfo& rows, int64_t n_rows, int64_t block_rows,
                  std::vector<std::pair<int64_t, int64_t>>* blocks) {
  blocks->clear();
  int64_t widest = 1;
  for (int64_t r = 0; r < n_rows;) {
    int64_t e = r + 1;
    while (e < n_rows && e - r < block_rows && rows.seq[e] == rows.seq[r] &&
           rows.pos[e] == rows.pos[e - 1] + 1)
      ++e;
    blocks->emplace_back(r, e - r);
    widest = std::max(widest, e - r);
    r = e;
  }
  return widest;
}

// One Attention call: its operands, and the shape and plan every work item shares.
struct AttnCall {
  const Tensor& q;
  const KvLayerView& kv;
  const RowInfo& rows;
  Tensor* out;
  const std::vector<std::pair<int64_t, int64_t>>& blocks;  // (first row, rows)
  AttnPlan plan;
  int group, head_dim, window, max_keys;
  bool include_self;

  // The first key row r reads (its window's start).
  int FirstKey(int64_t r) const { return WindowStart(rows.pos[r], window); }
};

// Brings the first keys of the work item (kv_head, block) into the cache.
void PrefetchItemStart(const AttnCall& c, int kv_head, int block) {
  const int64_t r = c.blocks[static_cast<size_t>(block)].first;
  const int lo = c.FirstKey(r);
  const ItemRows rows{c.kv,
                      c.rows.seq[r],
                      lo,
                      c.rows.pos[r] + 1,
                      c.plan.kv_per_item,
                      c.head_dim,
                      int64_t{kv_head} * c.head_dim,
                      nullptr};
  rows.Prefetch(c.kv.k, c.kv.type_k, c.kv.k_width, lo, kPrefetchAhead);
}

// The work item (kv_head, block, part): its queries' attention into c.out. `scratch`: the
// worker's, c.plan.max_queries x (c.max_keys + head_dim) floats for scores and accumulators,
// then the converted rows.
void RunItem(const AttnCall& c, int kv_head, int block, int part, float* scratch) {
  const auto [first, n_rows] = c.blocks[static_cast<size_t>(block)];
  const int h0 = part * c.plan.heads_per_item;
  const int nh = std::min(c.plan.heads_per_item, c.group - h0);
  const int64_t max_queries = c.plan.max_queries, head_dim = c.head_dim;
  AttentionQueries qs;
  qs.n_slices = c.plan.kv_per_item;
  qs.per_slice = static_cast<int>(n_rows) * nh;
  qs.n = qs.per_slice * qs.n_slices;
  for (int j = 0; j < qs.n; ++j) {  // query j: slice, then row, then head
    const int slice = j / qs.per_slice;
    const int64_t r = first + j % qs.per_slice / nh;
    const int64_t h = (kv_head + slice) * c.group + h0 + j % nh;
    qs.lo[j] = c.FirstKey(r);
    qs.last[j] = c.include_self ? c.rows.pos[r] : c.rows.pos[r] - 1;
    CHECK(qs.last[j] >= qs.lo[j]);
    qs.q[j] = c.q.row(r) + h * head_dim;
    qs.scores[j] = scratch + j * c.max_keys;
    qs.acc[j] = scratch + max_queries * c.max_keys + j * head_dim;
    qs.out[j] = c.out->row(r) + h * head_dim;
  }
  float* rows_buf = scratch + max_queries * (c.max_keys + head_dim);
  AttendBlock(c.kv, c.rows.seq[first], kv_head * head_dim, c.head_dim, qs, rows_buf);
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
  // Parallelise only when the work pays for a wake-up.
  int64_t work = 0;
  int max_keys = 1;
  for (int64_t r = 0; r < q.rows(); ++r) {
    work += static_cast<int64_t>(rows.pos[r] + 1) * head_dim;
    max_keys = std::max(max_keys, rows.pos[r] - WindowStart(rows.pos[r], window) + 1);
  }
  // A ring holds only its last `ring` positions: a read spanning more would see overwritten
  // rows.
  CHECKF(kv.ring == 0 || kv.ring >= kv.n_ctx || (window > 0 && max_keys <= kv.ring),
         "attention reads {} keys from a ring of {}", max_keys, kv.ring);
  work *= n_head;
  const bool parallel = work >= (1 << 15);
  // Row blocks of up to kBlockQueries / group rows.
  const int64_t widest_block =
      RowBlocks(rows, q.rows(), std::max(1, kBlockQueries / group), &attn_blocks_);
  const int64_t n_blocks = static_cast<int64_t>(attn_blocks_.size());
  const int64_t want = parallel ? static_cast<int64_t>(pool_.size()) : 1;
  const AttnPlan plan = PlanItems(n_head, n_head_kv, n_blocks, widest_block, want);
  // Per worker: each query's scores and accumulator, up to kValueTile converted rows a slice.
  static_assert(kValueTile >= quant::kMaxDotCols);
  const size_t need = static_cast<size_t>(int64_t{plan.max_queries} * (max_keys + head_dim) +
                                          int64_t{plan.kv_per_item} * kValueTile * head_dim);
  for (auto& s : attn_scratch_)
    if (s.size() < need) s.resize(need);
  // Items run sequence by sequence, and within one KV head by KV head: a worker's consecutive
  // items read the same keys and values (a prefill's blocks, one head at a time), or the other
  // halves of the same cache rows (a verify block's KV heads), which then stay in its cache.
  // Before, a decode step ran every sequence's first KV head, then every second one: 16
  // sequences' rows overflowed L2 in between and were read twice.
  attn_items_.clear();
  for (int64_t b0 = 0; b0 < n_blocks;) {
    int64_t b1 = b0 + 1;
    const int32_t seq = rows.seq[attn_blocks_[static_cast<size_t>(b0)].first];
    while (b1 < n_blocks && rows.seq[attn_blocks_[static_cast<size_t>(b1)].first] == seq) ++b1;
    for (int kv_head = 0; kv_head < n_head_kv; kv_head += plan.kv_per_item)
      for (int64_t block = b0; block < b1; ++block)
        for (int part = 0; part < plan.parts; ++part)
          attn_items_.push_back({kv_head, static_cast<int32_t>(block), part});
    b0 = b1;
  }
  const AttnCall call{q,     kv,       rows,   out,      attn_blocks_, plan,
                      group, head_dim, window, max_keys, include_self};
  const auto body = [&](int worker, int64_t b, int64_t e) {
    float* scratch = attn_scratch_[static_cast<size_t>(worker)].data();
    for (int64_t i = b; i < e; ++i) {
      const AttnItem& item = attn_items_[static_cast<size_t>(i)];
      if (i + 1 < e) {  // the next item's first keys, while this one runs
        const AttnItem& next = attn_items_[static_cast<size_t>(i + 1)];
        PrefetchItemStart(call, next.kv_head, next.block);
      }
      RunItem(call, item.kv_head, item.block, item.part, scratch);
    }
  };
  // A reference_wrapper fits std::function's inline storage: no allocation per call.
  // With a block for every worker, a thread claims a block's items together: two threads on
  // the two halves of the same cache rows fetched them twice (4 decode rows: +4%).
  const int64_t n_items = static_cast<int64_t>(attn_items_.size());
  const int64_t grain = !parallel ? n_items : n_blocks >= want ? plan.items_per_block : 1;
  pool_.ParallelForWorker(n_items, grain, body);
}

}  // namespace lockstep::backend

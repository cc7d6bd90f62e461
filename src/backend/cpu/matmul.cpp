// CPU matrix products and embedding lookups. Each output element is one DotRow call on one
// thread; threads split output columns, so no reduction ever spans threads or rows.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_rows.h"
#include "core/check.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace lockstep::backend {

namespace {
// Rows and sets prepared up front: cover the decode, verify and drafting batches and the
// distinct weight types of one MatMuls call, so steady-state steps never grow them (larger
// batches grow a set geometrically).
constexpr size_t kMinPreparedRows = 64, kMinPreparedSets = 4;
}  // namespace

void CpuBackend::NoteActivationWidth(int64_t cols) {
  if (cols <= widest_ && prepared_.size() >= kMinPreparedSets) return;
  widest_ = std::max(widest_, cols);
  if (prepared_.size() < kMinPreparedSets) prepared_.resize(kMinPreparedSets);
  // Quantized layouts take at most ~1.15 bytes per element (scale and sums per block).
  const size_t f32_floats = static_cast<size_t>(widest_);
  const size_t q_bytes = 2 * f32_floats;
  for (PreparedSet& ps : prepared_) {
    if (ps.rows.size() < kMinPreparedRows) ps.rows.resize(kMinPreparedRows);
    for (quant::PreparedRow& row : ps.rows) {
      row.f32.reserve(f32_floats);
      row.q.reserve(q_bytes);
    }
  }
}

const quant::PreparedRow* CpuBackend::PrepareRows(size_t set, const Weight& w, const Tensor& x) {
  NoteActivationWidth(x.cols());
  if (prepared_.size() <= set) prepared_.resize(set + 1);
  PreparedSet& ps = prepared_[set];
  const size_t n = static_cast<size_t>(x.rows());
  if (ps.rows.size() < n) ps.rows.resize(std::max(n, 2 * ps.rows.size()));
  quant::PreparedRow* p = ps.rows.data();
  pool_.ParallelFor(x.rows(), 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) quant::PrepareRow(w.type, x.row(r), x.cols(), &p[r]);
  });
  return p;
}

void CpuBackend::GetRows(const Weight& table, std::span<const int32_t> ids, float scale,
                         Tensor* y) {
  CHECK(y->rows() == static_cast<int64_t>(ids.size()) && y->cols() == table.ne[0]);
  for (size_t r = 0; r < ids.size(); ++r) {
    CHECKF(ids[r] >= 0 && ids[r] < table.n_rows(), "token id {} outside {} rows of {}", ids[r],
           table.n_rows(), table.name);
    WeightRowF32(table, ids[r], y->row(static_cast<int64_t>(r)));
    if (scale != 1.0f)
      for (int64_t i = 0; i < y->cols(); ++i) y->row(static_cast<int64_t>(r))[i] *= scale;
  }
}

namespace {

// Output columns go in blocks of 16, so each weight row is read from memory once for all
// batch rows.
constexpr int64_t kBlock = 16;

int64_t NumBlocks(const Weight& w) {
  return (w.n_rows() + kBlock - 1) / kBlock;
}

// Hand a thread at least ~64K multiply-adds: below that, waking a worker costs more than the
// work (the split never changes results: each element is computed whole by one thread).
int64_t Grain(const Tensor& x) {
  return std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, kBlock * x.cols() * x.rows()));
}

void CheckShapes(const Weight& w, const Tensor& x, const Tensor& y) {
  CHECKF(w.ne[0] == x.cols() && y.cols() == w.n_rows() && y.rows() == x.rows(),
         "matmul {}: weight {{{}, {}}} x [{}, {}] -> [{}, {}]", w.name, w.ne[0], w.n_rows(),
         x.rows(), x.cols(), y.rows(), y.cols());
}

// Float weights in a batch: the cache-blocked multi-row kernel (one weight load for many rows,
// 8 chains in flight), else prepared activation rows against a few weight rows at a time
// (DotCols). One row keeps DotCols: it is memory-bound there and needs no tiles.
bool UsesRowsKernel(const Weight& w, const Tensor& x) {
  return x.rows() > 1 && HasRowsKernel(w.type);
}

// Activation rows of n elements whose prepared form (about 1.14 bytes per element) fills about
// 1 MiB (half of a 2 MiB L2): a multiple of 16 (the tile kernels' row tile), at least 16.
int64_t TileRowPass(int64_t n) {
  return std::max<int64_t>(16, (int64_t{1} << 20) / (n + n / 7) / 16 * 16);
}

// Weight matrices above this size are taken to stream from memory rather than stay in cache.
constexpr size_t kStreamedWeightBytes = size_t{8} << 20;

// Column blocks [b, e) of y = x · w. `prepared` holds x's rows prepared for w's type (unused,
// and may be null, for the rows kernel). `tiles`: quantized weights against enough rows for it
// to pay (quant::MinDotTileRows) go through quant::DotTile (each weight block unpacked once per
// tile of rows) rather than DotCols row by row; both give the same bits.
void MatMulBlocks(const Weight& w, const Tensor& x, const quant::PreparedRow* prepared, Tensor* y,
                  int64_t b, int64_t e, float* scratch, bool tiles) {
  const int64_t n_out = w.n_rows(), n_rows = x.rows();
  const int64_t j_end = std::min(n_out, e * kBlock);
  if (UsesRowsKernel(w, x)) {
    static_assert(kBlock <= kRowsMaxCols);
    for (int64_t j0 = b * kBlock; j0 < j_end; j0 += kBlock) {
      RowsBlock blk;
      blk.type = w.type;
      blk.w = w.row(j0);
      blk.row_bytes = w.row_bytes;
      blk.n_cols = static_cast<int>(std::min(kBlock, j_end - j0));
      blk.x = x.data();
      blk.n_rows = n_rows;
      blk.n = x.cols();
      blk.y = y->row(0) + j0;
      blk.y_stride = y->cols();
      blk.prefetch_next = j0 + kBlock < n_out;
      MatMulRowsBlock(blk, scratch);
    }
    return;
  }
  if (tiles && w.packed) {
    // Packed weights (quant/packed.h): a column block is one packed group, for any row count.
    static_assert(kBlock == quant::kPackedCols);
    const int64_t pass = TileRowPass(x.cols());
    for (int64_t r0 = 0; r0 < n_rows; r0 += pass)
      for (int64_t j0 = b * kBlock; j0 < j_end; j0 += kBlock)
        quant::DotPacked(*w.packed, j0 / kBlock, static_cast<int>(std::min(kBlock, j_end - j0)),
                         prepared + r0, std::min(pass, n_rows - r0), y->row(r0) + j0, y->cols());
    return;
  }
  if (tiles && n_rows >= quant::MinDotTileRows() && quant::HasDotTile(w.type)) {
    static_assert(kBlock <= quant::kMaxTileCols);
    // Rows in passes whose prepared activations stay in L2 while the thread's column blocks
    // go over them (a long prompt's rows would otherwise stream from memory once per block).
    const int64_t pass = TileRowPass(x.cols());
    for (int64_t r0 = 0; r0 < n_rows; r0 += pass)
      for (int64_t j0 = b * kBlock; j0 < j_end; j0 += kBlock)
        quant::DotTile(w.row(j0), w.row_bytes, static_cast<int>(std::min(kBlock, j_end - j0)),
                       prepared + r0, std::min(pass, n_rows - r0), y->row(r0) + j0, y->cols());
    return;
  }
  // A few weight rows at a time against each prepared row: the weight rows stay in cache
  // across the batch and several dot chains run at once. A matrix too large to stay in cache
  // streams from memory, which some levels read faster in fewer rows a call (matvec_bench, K
  // 2048, 2 Zen 4 threads, AVX-512 one row a call: Q4_K 20.7 -> 28.0 GB/s, Q6_K 19.6 -> 37.8,
  // Q8_0 23.9 -> 45.7), while in-cache matrices run faster four at a time. With several
  // activation rows the group's weight rows are reused from L1 across them, so they go four at
  // a time whatever the size. The same bits.
  const bool streamed =
      n_rows == 1 && w.row_bytes * static_cast<size_t>(n_out) > kStreamedWeightBytes;
  const int64_t group = streamed ? quant::StreamedDotCols() : quant::kMaxDotCols;
  const void* ws[quant::kMaxDotCols];
  float out[quant::kMaxDotCols];
  for (int64_t j0 = b * kBlock; j0 < j_end; j0 += group) {
    const int nc = static_cast<int>(std::min<int64_t>(group, j_end - j0));
    for (int c = 0; c < nc; ++c) ws[c] = w.row(j0 + c);
    for (int64_t r = 0; r < n_rows; ++r) {
      quant::DotCols(ws, nc, prepared[r], out);
      for (int c = 0; c < nc; ++c) y->row(r)[j0 + c] = out[c];
    }
  }
}

// Decode-sized batches of packed weights split by rows rather than columns: each thread takes
// one slab of kSlabRows rows (a multiple of every level's register tile) against all columns, so
// it reads only its own prepared rows, writes only its own output rows and claims one chunk
// instead of one per column block. A 16-row decode step of the default target (12 layers of 512
// x 2,048, 2 threads, 10 alternating runs): median 6.43 -> 5.90 ms. Two slabs a thread (32 rows)
// measured no gain, so other batches keep the column split. The slab count, or 0.
constexpr int64_t kSlabRows = 8;
int64_t RowSlabs(const Tensor& x, int threads) {
  const bool one_slab_each = threads >= 2 && x.rows() == kSlabRows * threads;
  return one_slab_each ? threads : 0;
}

// y = x · w over slabs [b, e) of x's rows for every column (the packed kernels' bits).
void PackedSlabs(const Weight& w, const quant::PreparedRow* prepared, Tensor* y, int64_t b,
                 int64_t e) {
  const int64_t r0 = b * kSlabRows, n_rows = (e - b) * kSlabRows;
  for (int64_t j0 = 0; j0 < w.n_rows(); j0 += kBlock)
    quant::DotPacked(*w.packed, j0 / kBlock, static_cast<int>(std::min(kBlock, w.n_rows() - j0)),
                     prepared + r0, n_rows, y->row(r0) + j0, y->cols());
}

}  // namespace

float* CpuBackend::RowsScratch(int worker) {
  return rows_scratch_.data() + worker * kRowsScratchFloats;
}

void CpuBackend::MatMul(const Weight& w, const Tensor& x, Tensor* y) {
  // One output of MatMuls: the same preparation, split and kernels. Called by its class name:
  // a subclass's MatMuls may itself run through MatMul (the tests' shape-dependent backends).
  const MatMulOut out[] = {{&w, y}};
  CpuBackend::MatMuls(x, out);
}

void CpuBackend::MatMuls(const Tensor& x, std::span<const MatMulOut> outs) {
  // One parallel pass over the column blocks of all outputs laid end to end; x is prepared
  // once per weight type (set i of prepared_ for the i-th distinct type).
  mm_first_.assign(outs.size() + 1, 0);
  mm_prep_.assign(outs.size(), nullptr);
  mm_types_.clear();
  mm_types_.reserve(outs.size());  // even when no output prepares this time (rows kernel)
  NoteActivationWidth(x.cols());
  for (size_t i = 0; i < outs.size(); ++i) {
    const Weight& w = *outs[i].w;
    CheckShapes(w, x, *outs[i].y);
    mm_first_[i + 1] = mm_first_[i] + NumBlocks(w);
    if (UsesRowsKernel(w, x)) continue;
    size_t set = 0;
    while (set < mm_types_.size() && mm_types_[set] != w.type) ++set;
    if (set == mm_types_.size()) {
      mm_types_.push_back(w.type);
      PrepareRows(set, w, x);
    }
    mm_prep_[i] = prepared_[set].rows.data();
  }
  bool all_packed = quant_tiles_;
  for (size_t i = 0; i < outs.size(); ++i)
    all_packed = all_packed && mm_prep_[i] && outs[i].w->packed;
  if (const int64_t slabs = RowSlabs(x, pool_.size()); slabs > 0 && all_packed) {
    pool_.ParallelFor(slabs, 1, [&](int64_t b, int64_t e) {
      for (size_t i = 0; i < outs.size(); ++i)
        PackedSlabs(*outs[i].w, mm_prep_[i], outs[i].y, b, e);
    });
  } else {
    pool_.ParallelForWorker(mm_first_.back(), Grain(x), [&](int worker, int64_t b, int64_t e) {
      for (size_t i = 0; i < outs.size(); ++i) {
        const int64_t lo = std::max(b, mm_first_[i]), hi = std::min(e, mm_first_[i + 1]);
        if (lo < hi)
          MatMulBlocks(*outs[i].w, x, mm_prep_[i], outs[i].y, lo - mm_first_[i], hi - mm_first_[i],
                       RowsScratch(worker), quant_tiles_);
      }
    });
  }
}

void CpuBackend::MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                            int64_t ids_per_row, Tensor* y) {
  CHECK(w.ne[0] == x.cols() && y->cols() == ids_per_row && y->rows() == x.rows());
  CHECK(static_cast<int64_t>(ids.size()) == x.rows() * ids_per_row);
  const quant::PreparedRow* prepared = PrepareRows(0, w, x);
  pool_.ParallelFor(x.rows() * ids_per_row, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / ids_per_row;
      const int32_t id = ids[static_cast<size_t>(i)];
      CHECK(id >= 0 && id < w.n_rows());
      y->row(r)[i % ids_per_row] = quant::DotRow(w.row(id), prepared[r]);
    }
  });
}

}  // namespace lockstep::backend

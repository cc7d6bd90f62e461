// CPU matrix products and embedding lookups. Each output element is one DotRow call on one
// thread; threads split output columns, so no reduction ever spans threads or rows.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_rows.h"
#include "core/check.h"
#include "quant/quant.h"

namespace lockstep::backend {
namespace {

std::vector<quant::PreparedRow> PrepareRows(ThreadPool& pool, const Weight& w, const Tensor& x) {
  std::vector<quant::PreparedRow> rows(static_cast<size_t>(x.rows()));
  pool.ParallelFor(x.rows(), 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) quant::PrepareRow(w.type, x.row(r), x.cols(), &rows[r]);
  });
  return rows;
}

}  // namespace

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

// Column blocks [b, e) of y = x · w. `prepared` holds x's rows prepared for w's type (unused
// by the rows kernel, which uses `scratch` instead).
void MatMulBlocks(const Weight& w, const Tensor& x, const std::vector<quant::PreparedRow>& prepared,
                  Tensor* y, int64_t b, int64_t e, float* scratch) {
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
  // A few weight rows at a time against each prepared row: the weight rows stay in cache
  // across the batch and several dot chains run at once.
  const void* ws[quant::kMaxDotCols];
  float out[quant::kMaxDotCols];
  for (int64_t j0 = b * kBlock; j0 < j_end; j0 += quant::kMaxDotCols) {
    const int nc = static_cast<int>(std::min<int64_t>(quant::kMaxDotCols, j_end - j0));
    for (int c = 0; c < nc; ++c) ws[c] = w.row(j0 + c);
    for (int64_t r = 0; r < n_rows; ++r) {
      quant::DotCols(ws, nc, prepared[r], out);
      for (int c = 0; c < nc; ++c) y->row(r)[j0 + c] = out[c];
    }
  }
}

}  // namespace

float* CpuBackend::RowsScratch(int worker) {
  return rows_scratch_.data() + worker * kRowsScratchFloats;
}

void CpuBackend::MatMul(const Weight& w, const Tensor& x, Tensor* y) {
  CheckShapes(w, x, *y);
  std::vector<quant::PreparedRow> prepared;
  if (!UsesRowsKernel(w, x)) prepared = PrepareRows(pool_, w, x);
  pool_.ParallelForWorker(NumBlocks(w), Grain(x), [&](int worker, int64_t b, int64_t e) {
    MatMulBlocks(w, x, prepared, y, b, e, RowsScratch(worker));
  });
}

void CpuBackend::MatMuls(const Tensor& x, std::span<const MatMulOut> outs) {
  // One parallel pass over the column blocks of all outputs laid end to end; x is prepared
  // once per weight type.
  std::vector<int64_t> first(outs.size() + 1, 0);
  std::vector<const std::vector<quant::PreparedRow>*> prep(outs.size(), nullptr);
  std::vector<std::pair<DType, std::vector<quant::PreparedRow>>> by_type;
  by_type.reserve(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const Weight& w = *outs[i].w;
    CheckShapes(w, x, *outs[i].y);
    first[i + 1] = first[i] + NumBlocks(w);
    if (UsesRowsKernel(w, x)) continue;
    auto it = std::find_if(by_type.begin(), by_type.end(),
                           [&](const auto& p) { return p.first == w.type; });
    if (it == by_type.end()) {
      by_type.emplace_back(w.type, PrepareRows(pool_, w, x));
      it = by_type.end() - 1;
    }
    prep[i] = &it->second;
  }
  static const std::vector<quant::PreparedRow> kNone;
  pool_.ParallelForWorker(first.back(), Grain(x), [&](int worker, int64_t b, int64_t e) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i + 1]);
      if (lo < hi)
        MatMulBlocks(*outs[i].w, x, prep[i] ? *prep[i] : kNone, outs[i].y, lo - first[i],
                     hi - first[i], RowsScratch(worker));
    }
  });
}

void CpuBackend::MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                            int64_t ids_per_row, Tensor* y) {
  CHECK(w.ne[0] == x.cols() && y->cols() == ids_per_row && y->rows() == x.rows());
  CHECK(static_cast<int64_t>(ids.size()) == x.rows() * ids_per_row);
  const auto prepared = PrepareRows(pool_, w, x);
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

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

void CpuBackend::MatMul(const Weight& w, const Tensor& x, Tensor* y) {
  const int64_t n_out = w.n_rows();
  CHECKF(w.ne[0] == x.cols() && y->cols() == n_out && y->rows() == x.rows(),
         "matmul {}: weight {{{}, {}}} x [{}, {}] -> [{}, {}]", w.name, w.ne[0], n_out, x.rows(),
         x.cols(), y->rows(), y->cols());
  const int64_t n_rows = x.rows();
  // Columns in blocks of 16 so each weight row is read from memory once for all batch rows.
  constexpr int64_t kBlock = 16;
  const int64_t n_blocks = (n_out + kBlock - 1) / kBlock;
  // Hand a thread at least ~64K multiply-adds: below that, waking a worker costs more than
  // the work (the split never changes results: each element is computed whole by one thread).
  const int64_t grain =
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, kBlock * w.ne[0] * n_rows));
  if (n_rows > 1 && HasDotRows4(w.type)) {
    // Float weights in a batch: up to 4 rows share each weight load, each in DotRow's order.
    pool_.ParallelFor(n_blocks, grain, [&](int64_t b, int64_t e) {
      const float* xs[4];
      float out[4];
      for (int64_t j = b * kBlock; j < std::min(n_out, e * kBlock); ++j) {
        for (int64_t r0 = 0; r0 < n_rows; r0 += 4) {
          const int nr = static_cast<int>(std::min<int64_t>(4, n_rows - r0));
          for (int k = 0; k < nr; ++k) xs[k] = x.row(r0 + k);
          DotRows4(w.type, w.row(j), xs, nr, w.ne[0], out);
          for (int k = 0; k < nr; ++k) y->row(r0 + k)[j] = out[k];
        }
      }
    });
    return;
  }
  // Everything else: a few weight rows at a time against each prepared activation row (the
  // weight rows stay in cache across the batch; several dot chains run at once).
  const auto prepared = PrepareRows(pool_, w, x);
  pool_.ParallelFor(n_blocks, grain, [&](int64_t b, int64_t e) {
    const void* ws[quant::kMaxDotCols];
    float out[quant::kMaxDotCols];
    const int64_t j_end = std::min(n_out, e * kBlock);
    for (int64_t j0 = b * kBlock; j0 < j_end; j0 += quant::kMaxDotCols) {
      const int nc = static_cast<int>(std::min<int64_t>(quant::kMaxDotCols, j_end - j0));
      for (int c = 0; c < nc; ++c) ws[c] = w.row(j0 + c);
      for (int64_t r = 0; r < n_rows; ++r) {
        quant::DotCols(ws, nc, prepared[r], out);
        for (int c = 0; c < nc; ++c) y->row(r)[j0 + c] = out[c];
      }
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

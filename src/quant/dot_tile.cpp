// DotTile: the run-time choice of the multi-row (tile) kernels for quantized weights.
#include "core/check.h"
#include "quant/dot_internal.h"
#include "quant/quant.h"

namespace lockstep::quant {
namespace {

// The kernel level `isa` runs for `t`: its own, else the level below's (portable has none).
detail::TileFn TileFor(Isa isa, DType t) {
  if (isa == Isa::kAvx512)
    if (detail::TileFn f = detail::Avx512Tile(t)) return f;
  if (isa >= Isa::kAvx2) return detail::Avx2Tile(t);
  return nullptr;
}

void Run(detail::TileFn f, const void* w, size_t row_bytes, int n_cols, const PreparedRow* x,
         int64_t n_rows, float* out, int64_t out_stride) {
  CHECKF(f != nullptr, "DotTile: no tile kernel for {}", Name(x[0].wtype));
  CHECKF(n_cols >= 1 && n_cols <= kMaxTileCols && n_rows >= 1, "DotTile: {} x {}", n_rows, n_cols);
  // The AVX-512 kernels gather with int32 byte offsets of up to 15 rows.
  CHECKF(row_bytes * kMaxTileCols < (size_t{1} << 31), "DotTile: rows of {} bytes", row_bytes);
  f(static_cast<const uint8_t*>(w), row_bytes, n_cols, x, n_rows, out, out_stride);
}

}  // namespace

bool HasDotTile(DType t) {
  return TileFor(CpuIsa(), t) != nullptr;
}

bool HasDotTileIsa(Isa isa, DType t) {
  return CpuHasIsa(isa) && TileFor(isa, t) != nullptr;
}

// Tile kernels unpack each weight block once per tile of rows (the AVX-512 ones 16 columns at
// a time, with gathers); below a few rows that costs more than it saves. Measured on Q4_K_M d17b
// prefill, 2 Zen 4 cores (cpu_compare_bench --baseline): AVX-512 tiles won from 16 rows (2 rows:
// 11 tok/s through them, 52 row by row through DotCols), AVX2 tiles from 4.
int64_t MinDotTileRows() {
  return CpuIsa() == Isa::kAvx512 ? 16 : 4;
}

void DotTile(const void* w, size_t row_bytes, int n_cols, const PreparedRow* x, int64_t n_rows,
             float* out, int64_t out_stride) {
  Run(TileFor(CpuIsa(), x[0].wtype), w, row_bytes, n_cols, x, n_rows, out, out_stride);
}

void DotTileIsa(Isa isa, const void* w, size_t row_bytes, int n_cols, const PreparedRow* x,
                int64_t n_rows, float* out, int64_t out_stride) {
  CHECKF(CpuHasIsa(isa), "DotTile: this CPU lacks {}", IsaName(isa));
  Run(TileFor(isa, x[0].wtype), w, row_bytes, n_cols, x, n_rows, out, out_stride);
}

}  // namespace lockstep::quant

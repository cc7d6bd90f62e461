// GGUF block formats: dequantization, quantization and the per-row dot products the CPU
// matmul is built on. Every function here reduces in an order fixed by the row alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace lockstep::quant {

// True when DequantizeRow supports `t`.
bool CanDequantize(DType t);
// Expands `n` elements (a whole number of blocks) of type `t` to float32.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);
// dst[i] = src[i] widened from F16 or BF16 (`t`), bit for bit core/half.h's conversions, in
// vector lanes where the CPU has them (KV cache rows, float weights).
void WidenHalfRow(DType t, const void* src, float* dst, int64_t n);

// True when QuantizeRow supports `t`.
bool CanQuantize(DType t);
// Quantizes `n` floats (a whole number of blocks) into `dst` (RowBytes(t, n) bytes).
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// The activation side of a dot product against weights of type `wtype`. A row of activations
// is prepared once (for integer-dot types it is quantized per row, never across rows) and then
// dotted against many weight rows.
struct PreparedRow {
  DType wtype = DType::F32;
  int64_t n = 0;
  std::vector<float> f32;  // used by float weight types and the generic path
  std::vector<uint8_t> q;  // used by integer-dot paths
};
void PrepareRow(DType wtype, const float* x, int64_t n, PreparedRow* out);

// dot(w_row, x) for one weight row of type `wtype`. The result is a pure function of the two
// rows' bytes: the same on any batch, thread count or call site.
float DotRow(const void* w_row, const PreparedRow& x);

// Most weight rows one DotCols call takes.
inline constexpr int kMaxDotCols = 4;
// out[c] = DotRow(w_rows[c], x) for c < n_cols (1..kMaxDotCols), bit for bit: the rows only
// share activation loads and keep several independent chains in flight.
void DotCols(const void* const* w_rows, int n_cols, const PreparedRow& x, float* out);
// How many weight rows a DotCols call should take when the weights stream from memory (a matrix
// too large for the caches) at this CPU's level: the AVX-512 kernels read DRAM about twice as
// fast one row at a time, the AVX2 ones as fast four at a time. Only speed depends on it.
int StreamedDotCols();

// Instruction-set levels of the dot kernels, lowest first. Every level reproduces the portable
// kernels bit for bit; DotRow/DotCols use the best level the CPU has (chosen at run time).
enum class Isa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kNumIsas = 3;
std::string_view IsaName(Isa isa);
bool CpuHasIsa(Isa isa);
Isa CpuIsa();  // the best level this CPU runs
// The level whose kernel runs for `t` when `isa` is asked for (levels without a kernel of their
// own for a type fall back to the level below).
Isa KernelIsa(Isa isa, DType t);
// WidenHalfRow with level `isa`'s code (CpuHasIsa(isa) must hold): tests compare levels.
void WidenHalfRowIsa(Isa isa, DType t, const void* src, float* dst, int64_t n);
// PrepareRow with the code of level `isa` (CpuHasIsa(isa) must hold): the same bytes at every
// level; tests compare levels.
void PrepareRowIsa(Isa isa, DType wtype, const float* x, int64_t n, PreparedRow* out);
// DotCols with the kernels of level `isa` (CpuHasIsa(isa) must hold); tests compare levels.
void DotColsIsa(Isa isa, const void* const* w_rows, int n_cols, const PreparedRow& x, float* out);

// Several activation rows against a few weight rows (prefill chunks, verify passes, batches):
// out[r * out_stride + c] = DotRow(w + c * row_bytes, x[r]) for r < n_rows and c < n_cols
// (1..kMaxTileCols), bit for bit. Each weight block is loaded and unpacked once for a tile of
// activation rows; every output keeps DotRow's integers, per-block float expression and Acc8
// order. Only for types HasDotTile accepts (elsewhere call DotCols per row); every x[r] must
// be prepared for w's type and length.
inline constexpr int kMaxTileCols = 16;
bool HasDotTile(DType t);
// The fewest rows for which DotTile beats DotCols row by row at this CPU's level (both give the
// same bits, so a caller may pick either by speed alone).
int64_t MinDotTileRows();
void DotTile(const void* w, size_t row_bytes, int n_cols, const PreparedRow* x, int64_t n_rows,
             float* out, int64_t out_stride);
// The tile kernel of level `isa` (the level itself or the one below without its own): tests
// hold every level this CPU runs to the same bits. HasDotTileIsa is false when the CPU lacks
// `isa` or no level up to it has a tile kernel for `t`.
bool HasDotTileIsa(Isa isa, DType t);
void DotTileIsa(Isa isa, const void* w, size_t row_bytes, int n_cols, const PreparedRow* x,
                int64_t n_rows, float* out, int64_t out_stride);

// f32 x f32 dot in lockstep's canonical order (8 interleaved partial sums, then a fixed tree).
float DotF32(const float* a, const float* b, int64_t n);
// out[c] = DotF32(a[c], b, n) for c < n_cols (1..kMaxDotCols), bit for bit, with the best
// kernel this CPU has (attention scores: several keys against one query).
void DotF32Cols(const float* const* a, int n_cols, const float* b, int64_t n, float* out);
// Scores of several queries that all read the same kMaxDotCols keys (attention's blocks of
// queries): out[q][c] = DotF32(keys[c], queries[q], n) for c < kMaxDotCols and q < n_queries
// (1..kMaxDotQueries), bit for bit; each key is loaded once for all queries.
inline constexpr int kMaxDotQueries = 4;
void DotF32Block(const float* const* keys, const float* const* queries, int n_queries, int64_t n,
                 float* const* out);
// DotF32Block with the kernel of level `isa` (CpuHasIsa(isa) must hold); tests compare levels.
void DotF32BlockIsa(Isa isa, const float* const* keys, const float* const* queries, int n_queries,
                    int64_t n, float* const* out);
// Attention's weighted sum of value rows into accumulators that all read the same rows:
// acc[q][i] = (...((acc[q][i] + w[q][0] * rows[0][i]) + w[q][1] * rows[1][i]) ...) +
// w[q][n_rows-1] * rows[n_rows-1][i] for i < n and q < n_acc (1..kMaxWeightedAccs): each product
// rounded, then added in row order (no fused multiply-add), the same bits on every level and
// for any n_acc; each value row is loaded once for all accumulators.
inline constexpr int kMaxWeightedAccs = 4;
void AddWeightedRows(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                     int64_t n, float* const* acc);
// AddWeightedRows with the kernel of level `isa` (CpuHasIsa(isa) must hold); tests compare levels.
void AddWeightedRowsIsa(Isa isa, const float* const* rows, int n_rows, const float* const* w,
                        int n_acc, int64_t n, float* const* acc);

}  // namespace lockstep::quant

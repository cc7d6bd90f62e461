// Cache-blocked multi-row float matmul: a block of weight rows against many activation rows.
// Each output is formed in exactly quant::DotF32's order (8 lanes, multiply then add, tail
// into lanes 0.., fixed final tree), so it equals DotRow bit for bit; blocking only changes
// which (row, column) chains are in flight together and where their lanes wait between tiles.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace lockstep::backend {

// Columns (weight rows) per call at most, and the reduction tile: 256 elements of 4 activation
// rows (4 KB) and of 16 weight rows (8-16 KB) stay in L1 while the tile is worked on.
constexpr int kRowsMaxCols = 16;
constexpr int64_t kRowsTile = 256;
// Activation rows whose lane accumulators are held at once; more rows are done in passes.
constexpr int64_t kRowsChunk = 64;
// Scratch floats one call needs (8 lanes per (row, column) pair of a chunk).
constexpr int64_t kRowsScratchFloats = kRowsMaxCols * kRowsChunk * 8;

// y[r][c] = dot(weight row c, x row r) for c < n_cols, r < n_rows.
struct RowsBlock {
  DType type = DType::F32;
  const uint8_t* w = nullptr;  // n_cols weight rows of n elements, row_bytes apart
  size_t row_bytes = 0;
  int n_cols = 0;            // 1..kRowsMaxCols
  const float* x = nullptr;  // n_rows rows of n floats, contiguous
  int64_t n_rows = 0;
  int64_t n = 0;
  float* y = nullptr;  // y[r * y_stride + c]
  int64_t y_stride = 0;
  // Prefetch the weight rows right after this block (the caller's next block) while working.
  bool prefetch_next = false;
};

// True when the blocked kernel exists for `t` on this CPU.
bool HasRowsKernel(DType t);
// Runs `b`; scratch holds kRowsScratchFloats floats (per thread).
void MatMulRowsBlock(const RowsBlock& b, float* scratch);

// The instruction sets MatMulRowsBlock picks from (the widest the CPU has); exposed so tests
// can hold every kernel this CPU runs to the same bits.
enum class RowsIsa { kAvx2, kAvx512 };
bool HasRowsIsa(RowsIsa isa);
void MatMulRowsBlockWith(RowsIsa isa, const RowsBlock& b, float* scratch);

}  // namespace lockstep::backend

// Internal contract between the portable and ISA-specific dot kernels.
//
// Every quantized dot is computed as: per weight block, exact integer sums of weight levels
// times int8 activation levels (any summation order gives the same integers), turned into one
// float contribution by a fixed scalar expression, and the contributions of block b are added
// to partial sum b % 8, reduced by the same tree as DotF32. SIMD only speeds up the integer
// part, so the SIMD and portable kernels agree bit for bit by construction.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "quant/quant.h"

namespace lockstep::quant::detail {

// Prepared activation layouts (PreparedRow::q), per block of the weight type's size:
//   Q8x32:  float d, int8 q[32]                        (36 bytes)
//   Q8x256: float d, int8 q[256], int16 bsum[16]       (292 bytes; bsum = sums of 16 levels)
enum class ActFormat { kF32, kQ8x32, kQ8x256 };
constexpr int kQ8x32Bytes = 36;
constexpr int kQ8x256Bytes = 292;

// Q8 block scale amax / 127 and, in *inv, the reciprocal the levels are formed with (0 for an
// all-zero block): one definition for the portable and the AVX2 activation quantization.
inline float Q8Scale(float amax, float* inv) {
  const float d = amax / 127.0f;
  *inv = d != 0 ? 1.0f / d : 0.0f;
  return d;
}

// AVX2 quantization of whole blocks (prepare_avx2.cpp): the portable code's bytes.
void PrepareQ8x32Avx2(const float* x, int64_t n_blocks, uint8_t* out);
void PrepareQ8x256Avx2(const float* x, int64_t n_blocks, uint8_t* out);

// The activation format DotRow's fast path wants for weights of type `t` (kF32: generic).
ActFormat ActivationFormat(DType t);

using RowDotFn = float (*)(const uint8_t* w, const PreparedRow& x);
// out[c] = dot(w[c], x) for c < n_cols (1..kMaxDotCols).
using ColsDotFn = void (*)(const uint8_t* const* w, int n_cols, const PreparedRow& x, float* out);

// A level's kernels for one type: a single-row kernel, a multi-row one, or both.
struct Kernel {
  RowDotFn row = nullptr;
  ColsDotFn cols = nullptr;
  explicit operator bool() const { return row != nullptr || cols != nullptr; }
};
RowDotFn PortableDot(DType t);  // nullptr: no fast kernel
Kernel Avx2Kernel(DType t);     // empty: no AVX2 kernel (dot_avx2.cpp)
Kernel Avx512Kernel(DType t);   // empty: no AVX-512 kernel (dot_avx512.cpp)
// DotTile's kernels (n_cols 1..kMaxTileCols): dot_tile_avx2.cpp, dot_tile_avx512.cpp; nullptr
// where the level has none for the type.
using TileFn = void (*)(const uint8_t* w, size_t row_bytes, int n_cols, const PreparedRow* x,
                        int64_t n_rows, float* out, int64_t out_stride);
TileFn Avx2Tile(DType t);
TileFn Avx512Tile(DType t);
TileFn Avx512WideTile(DType t);  // a column per lane (dot_tile_wide_avx512.cpp)
// The packed kernels (quant/packed.h) for one 16-row group of nb packing units: out[r * out_stride
// + c] for r < n_rows, c < n_cols (dot_packed_avx512.cpp, dot_packed_avx2.cpp); nullptr where the
// level has none. Both levels read the same packed bytes.
using PackedFn = void (*)(const uint8_t* group, int64_t nb, int n_cols, const PreparedRow* x,
                          int64_t n_rows, float* out, int64_t out_stride);
PackedFn Avx512Packed(DType t);
PackedFn Avx2Packed(DType t);
// Where a type's packed dwords come from in its GGUF blocks (quant/packed.h). A packing unit is
// unit_blocks consecutive GGUF blocks (block_bytes in all): types whose 32-element blocks are
// not whole dwords (Q4_0: 18 bytes) pack two blocks per unit, with both blocks' scales in one
// dword, so the packed copy is no larger than the blocks.
struct PackLayout {
  int n_dwords = 0, block_bytes = 0, unit_blocks = 1;
  int offset[64] = {};  // byte offset in the unit of packed dword m
  // -1: dword m is the dword at offset[m]. Otherwise its low half is the low half of the dword
  // at offset[m] and its high half the low half of the dword at hi_offset[m].
  int hi_offset[64];
  PackLayout() {
    for (int& o : hi_offset) o = -1;
  }
};
// Writes one packed group of nb units: dword m of unit b of row c is read at rows +
// row_offset[c] + b * block_bytes + offset[m] (one gather a packed dword, two for a merged one;
// the AVX2 one gathers each half of 8 rows: the same bytes).
void Avx512PackGroup(const uint8_t* rows, const int32_t* row_offset, const PackLayout& layout,
                     int64_t nb, uint8_t* dst);
void Avx2PackGroup(const uint8_t* rows, const int32_t* row_offset, const PackLayout& layout,
                   int64_t nb, uint8_t* dst);
// DotF32Cols on AVX2 (dot_avx2.cpp).
void DotF32ColsAvx2(const float* const* a, int n_cols, const float* b, int64_t n, float* out);
// DotF32Block on AVX2 (dot_avx2.cpp) and AVX-512 (dot_float_avx512.cpp).
void DotF32BlockAvx2(const float* const* keys, const float* const* queries, int n_queries,
                     int64_t n, float* const* out);
void DotF32BlockAvx512(const float* const* keys, const float* const* queries, int n_queries,
                       int64_t n, float* const* out);
// AddWeightedRows on AVX2 (dot_avx2.cpp) and AVX-512 (dot_float_avx512.cpp): the accumulators
// stay in registers across the rows, each value row loaded once for all of them.
void AddWeightedRowsAvx2(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                         int64_t n, float* const* acc);
void AddWeightedRowsAvx512(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                           int64_t n, float* const* acc);

// Header-local (internal linkage) so the AVX2 translation unit gets its own copies and no
// AVX-encoded out-of-line copy can be picked by the linker for portable callers.
namespace {

// The canonical reduction: contribution of block b goes to partial b % 8, then a fixed tree.
struct Acc8 {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  void Add(int64_t b, float c) { a[b & 7] += c; }
  float Sum() const {
    const float s0 = (a[0] + a[4]) + (a[1] + a[5]);
    const float s1 = (a[2] + a[6]) + (a[3] + a[7]);
    return s0 + s1;
  }
};

// Float composition shared by both paths; ints are exact, so this fixes the float result.
inline float Combine(float dw, float dx, int32_t isum) {
  return (dw * dx) * static_cast<float>(isum);
}
inline float CombineMin(float d, float dmin, float dx, int32_t isum, int32_t imin) {
  return (d * dx) * static_cast<float>(isum) - (dmin * dx) * static_cast<float>(imin);
}

}  // namespace

}  // namespace lockstep::quant::detail

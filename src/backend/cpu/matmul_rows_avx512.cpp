// AVX-512 blocked multi-row float matmul: two columns' 8-lane sums per zmm register.
//
// Each zmm accumulator holds [column a lanes 0-7 | column b lanes 0-7] of one activation row,
// and the row's 8 floats are broadcast to both halves, so every lane sees exactly the
// multiply-then-add sequence of matmul_rows.h's contract. The point is the instruction count:
// on cores that split 512-bit ops into two 256-bit halves the arithmetic rate is the same as
// AVX2, but half as many instructions are issued, and 32 registers hold 2x8 chains at once.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_rows_x86.h"

namespace lockstep::backend {
namespace {

// Eight weights from element i of row a, then eight of row b, as floats (exact conversions).
template <W kW>
inline __m512 LoadPair(const uint8_t* a, const uint8_t* b, int64_t i) {
  if constexpr (kW == W::kF32) {
    const __m256 lo = _mm256_loadu_ps(reinterpret_cast<const float*>(a + 4 * i));
    const __m256 hi = _mm256_loadu_ps(reinterpret_cast<const float*>(b + 4 * i));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  } else {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * i));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * i));
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    if constexpr (kW == W::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Where the microkernel works: column pairs from w (pair p is rows 2p and 2p+1, or 2p twice
// when the block has an odd column count; row_bytes apart) against kRows activation rows from
// x (n apart), len elements (a multiple of 8) from where w and x point. acc holds 16 floats per
// (pair, row): pair p, row r at acc[(p * acc_rows + r) * 16].
struct Tile {
  const uint8_t* w;
  size_t row_bytes;
  int n_cols;  // columns of the block left from w, to pair the last odd one with itself
  const float* x;
  int64_t n, len;
  float* acc;
  int64_t acc_rows;
  bool prefetch;  // touch the same span of the rows block_bytes further on
  size_t block_bytes;
};

// kPairs x kRows independent zmm chains; each weight pair is converted once for kRows rows.
template <W kW, int kPairs, int kRows>
void Micro(const Tile& t) {
  __m512 a[kPairs][kRows];
  for (int p = 0; p < kPairs; ++p)
    for (int r = 0; r < kRows; ++r) a[p][r] = _mm512_loadu_ps(t.acc + (p * t.acc_rows + r) * 16);
  const uint8_t* w[2 * kPairs];
  for (int c = 0; c < 2 * kPairs; ++c) w[c] = t.w + std::min(c, t.n_cols - 1) * t.row_bytes;
  const float* x[kRows];
  for (int r = 0; r < kRows; ++r) x[r] = t.x + r * t.n;
  constexpr int64_t kLine = 64 / kBytes<kW>;  // elements per cache line
  for (int64_t i = 0; i < t.len; i += 8) {
    if (t.prefetch && i % kLine == 0)
      for (int c = 0; c < 2 * kPairs; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(w[c] + kBytes<kW> * i + t.block_bytes),
                     _MM_HINT_T0);
    __m512 wv[kPairs];
    for (int p = 0; p < kPairs; ++p) wv[p] = LoadPair<kW>(w[2 * p], w[2 * p + 1], i);
    for (int r = 0; r < kRows; ++r) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[r] + i));
      for (int p = 0; p < kPairs; ++p) a[p][r] = _mm512_add_ps(a[p][r], _mm512_mul_ps(wv[p], xv));
    }
  }
  for (int p = 0; p < kPairs; ++p)
    for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(t.acc + (p * t.acc_rows + r) * 16, a[p][r]);
}

template <W kW, int kRows>
void MicroPairs(int n_pairs, const Tile& t) {
  if (n_pairs == 1) return Micro<kW, 1, kRows>(t);
  return Micro<kW, 2, kRows>(t);
}

template <W kW>
void MicroDispatch(int n_pairs, int n_rows, const Tile& t) {
  switch (n_rows) {
    case 1:
      return MicroPairs<kW, 1>(n_pairs, t);
    case 2:
      return MicroPairs<kW, 2>(n_pairs, t);
    case 3:
      return MicroPairs<kW, 3>(n_pairs, t);
    case 4:
      return MicroPairs<kW, 4>(n_pairs, t);
    case 5:
      return MicroPairs<kW, 5>(n_pairs, t);
    case 6:
      return MicroPairs<kW, 6>(n_pairs, t);
    case 7:
      return MicroPairs<kW, 7>(n_pairs, t);
    default:
      return MicroPairs<kW, 8>(n_pairs, t);
  }
}

// The tail elements (n % 8) into lanes 0.., then DotF32's tree, for every pair of the chunk.
template <W kW>
void Finish(const RowsBlock& b, int64_t r0, int64_t rows, const float* acc) {
  for (int c = 0; c < b.n_cols; ++c) {
    const uint8_t* w = b.w + c * b.row_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      b.y[(r0 + r) * b.y_stride + c] = TailAndTree<kW>(
          acc + ((c / 2) * rows + r) * 16 + (c % 2) * 8, w, b.x + (r0 + r) * b.n, b.n);
    }
  }
}

// Rows [r0, r0 + rows) against the block: K tiles outermost so a tile of 8 activation rows
// and the block's weight tile stay in L1 while every column of the block passes over them.
template <W kW>
void Chunk(const RowsBlock& b, int64_t r0, int64_t rows, float* acc) {
  const int n_pairs = (b.n_cols + 1) / 2;
  std::fill(acc, acc + n_pairs * rows * 16, 0.0f);
  const int64_t n8 = b.n & ~int64_t{7};
  for (int64_t k0 = 0; k0 < n8; k0 += kRowsTile) {
    const int64_t len = std::min(n8, k0 + kRowsTile) - k0;
    for (int64_t g = 0; g < rows; g += 8) {
      const int nr = static_cast<int>(std::min<int64_t>(8, rows - g));
      for (int p0 = 0; p0 < n_pairs; p0 += 2) {
        const Tile t{b.w + 2 * p0 * b.row_bytes + kBytes<kW> * k0,
                     b.row_bytes,
                     b.n_cols - 2 * p0,
                     b.x + (r0 + g) * b.n + k0,
                     b.n,
                     len,
                     acc + (p0 * rows + g) * 16,
                     rows,
                     b.prefetch_next && r0 == 0 && g == 0,
                     b.n_cols * b.row_bytes};
        MicroDispatch<kW>(std::min(2, n_pairs - p0), nr, t);
      }
    }
  }
  Finish<kW>(b, r0, rows, acc);
}

template <W kW>
void Run(const RowsBlock& b, float* scratch) {
  ForRowChunks(b, [&](int64_t r0, int64_t rows) { Chunk<kW>(b, r0, rows, scratch); });
}

}  // namespace

void MatMulRowsBlockAvx512(const RowsBlock& b, float* scratch) {
  switch (b.type) {
    case DType::F16:
      return Run<W::kF16>(b, scratch);
    case DType::BF16:
      return Run<W::kBF16>(b, scratch);
    default:
      return Run<W::kF32>(b, scratch);
  }
}

}  // namespace lockstep::backend

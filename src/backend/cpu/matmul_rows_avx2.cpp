// AVX2/F16C blocked multi-row float matmul (see matmul_rows.h for the ordering contract).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_rows_x86.h"

namespace lockstep::backend {
namespace {

// Eight weights from element i as floats (every conversion is exact).
template <W kW>
inline __m256 Load8(const uint8_t* w, int64_t i) {
  if constexpr (kW == W::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w + 4 * i));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i));
    if constexpr (kW == W::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// Where the microkernel works: kCols weight rows from w (row_bytes apart) against kRows
// activation rows from x (n apart), elements [i0, i1) (multiples of 8). acc holds 8 lanes per
// pair: column c, row r at acc[(c * acc_rows + r) * 8].
struct Tile {
  const uint8_t* w;
  size_t row_bytes;
  const float* x;
  int64_t n, i0, i1;
  float* acc;
  int64_t acc_rows;
  bool prefetch;  // touch the same span of the rows block_bytes further on
  size_t block_bytes;
};

// kCols x kRows independent add chains; each weight vector is converted once for kRows rows.
template <W kW, int kCols, int kRows>
void Micro(const Tile& t) {
  __m256 a[kCols][kRows];
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) a[c][r] = _mm256_loadu_ps(t.acc + (c * t.acc_rows + r) * 8);
  const uint8_t* w[kCols];
  for (int c = 0; c < kCols; ++c) w[c] = t.w + c * t.row_bytes;
  const float* x[kRows];
  for (int r = 0; r < kRows; ++r) x[r] = t.x + r * t.n;
  constexpr int64_t kLine = 64 / kBytes<kW>;  // elements per cache line
  for (int64_t i = t.i0; i < t.i1; i += 8) {
    if (t.prefetch && i % kLine == 0)
      for (int c = 0; c < kCols; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(w[c] + kBytes<kW> * i + t.block_bytes),
                     _MM_HINT_T0);
    __m256 wv[kCols];
    for (int c = 0; c < kCols; ++c) wv[c] = Load8<kW>(w[c], i);
    for (int r = 0; r < kRows; ++r) {
      __m256 xv = _mm256_loadu_ps(x[r] + i);
      // Keep xv in a register: folded into each multiply it would be loaded once per column,
      // and the loads, not the arithmetic, would bound the loop.
      __asm__("" : "+x"(xv));
      for (int c = 0; c < kCols; ++c) a[c][r] = _mm256_add_ps(a[c][r], _mm256_mul_ps(wv[c], xv));
    }
  }
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(t.acc + (c * t.acc_rows + r) * 8, a[c][r]);
}

template <W kW, int kRows>
void MicroCols(int n_cols, const Tile& t) {
  switch (n_cols) {
    case 1:
      return Micro<kW, 1, kRows>(t);
    case 2:
      return Micro<kW, 2, kRows>(t);
    case 3:
      return Micro<kW, 3, kRows>(t);
    default:
      return Micro<kW, 4, kRows>(t);
  }
}

template <W kW>
void MicroDispatch(int n_cols, int n_rows, const Tile& t) {
  switch (n_rows) {
    case 1:
      return MicroCols<kW, 1>(n_cols, t);
    case 2:
      return MicroCols<kW, 2>(n_cols, t);
    case 3:
      return MicroCols<kW, 3>(n_cols, t);
    default:
      return MicroCols<kW, 4>(n_cols, t);
  }
}

// Columns per microkernel call for a group of `rows` rows: about 8 chains in flight, and as
// many rows as possible share each converted weight vector.
int ColsFor(int rows) {
  return rows >= 3 ? 2 : 4;
}

// The tail elements (n % 8) into lanes 0.., then DotF32's tree, for every pair of the chunk.
template <W kW>
void Finish(const RowsBlock& b, int64_t r0, int64_t rows, const float* acc) {
  for (int c = 0; c < b.n_cols; ++c) {
    const uint8_t* w = b.w + c * b.row_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      b.y[(r0 + r) * b.y_stride + c] =
          TailAndTree<kW>(acc + (c * rows + r) * 8, w, b.x + (r0 + r) * b.n, b.n);
    }
  }
}

// Rows [r0, r0 + rows) against the block: K tiles outermost so a tile of 4 activation rows
// and the block's weight tile stay in L1 while every column of the block passes over them.
template <W kW>
void Chunk(const RowsBlock& b, int64_t r0, int64_t rows, float* acc) {
  std::fill(acc, acc + b.n_cols * rows * 8, 0.0f);
  const int64_t n8 = b.n & ~int64_t{7};
  for (int64_t k0 = 0; k0 < n8; k0 += kRowsTile) {
    const int64_t k1 = std::min(n8, k0 + kRowsTile);
    for (int64_t g = 0; g < rows; g += 4) {
      const int nr = static_cast<int>(std::min<int64_t>(4, rows - g));
      const int step = ColsFor(nr);
      for (int c0 = 0; c0 < b.n_cols; c0 += step) {
        const int nc = std::min(step, b.n_cols - c0);
        const Tile t{b.w + c0 * b.row_bytes,
                     b.row_bytes,
                     b.x + (r0 + g) * b.n,
                     b.n,
                     k0,
                     k1,
                     acc + (c0 * rows + g) * 8,
                     rows,
                     b.prefetch_next && r0 == 0 && g == 0,
                     b.n_cols * b.row_bytes};
        MicroDispatch<kW>(nc, nr, t);
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

void MatMulRowsBlockAvx2(const RowsBlock& b, float* scratch) {
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

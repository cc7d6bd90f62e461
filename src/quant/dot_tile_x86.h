// The tile driver shared by the AVX2 and AVX-512 multi-row kernels (quant.h's DotTile). Include
// only from *_avx2.cpp / *_avx512.cpp: header-local, like dot_x86.h, so each ISA's object keeps
// its own copy.
//
// A tile is 4 weight rows (columns of the output, one per float lane) against up to
// kTileRows activation rows. Per weight block the 4 rows are unpacked once (levels, scales,
// minimums widened for the integer instructions) and then applied to every activation row of
// the tile: the exact integer sums of each (row, column) pair, the per-block float expression
// for the 4 columns lane by lane, and Acc8's partial b % 8, as the one-row kernels do.
#pragma once

#include <algorithm>

#include "quant/dot_x86.h"

namespace lockstep::quant::detail {
namespace {

// Activation rows per tile: each unpacked weight block serves this many rows, and their Acc8
// lanes (8 x 16 bytes each) stay in L1.
constexpr int kTileRows = 8;

// CombineMin for four columns, lane by lane: (d * dx) * isum - (dmin * dx) * imin.
inline __m128 CombineMin4(__m128 d, __m128 dmin, __m128 dx, __m128i isum, __m128i imin) {
  return _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, dx), _mm_cvtepi32_ps(isum)),
                    _mm_mul_ps(_mm_mul_ps(dmin, dx), _mm_cvtepi32_ps(imin)));
}
// Q6_K's levels are stored plus 32: the exact integer is sum(scale * q . x) - 32 * sum(scale *
// bsum), for four columns' int32 sums.
inline __m128i Minus32(__m128i isum, __m128i corr) {
  return _mm_sub_epi32(isum, _mm_slli_epi32(corr, 5));
}

// Q4_K/Q5_K block terms of 4 columns from their unpacked weights u (q, sc, mn, d, dmin): the
// ISA's scaled sub-block dot for isum, the minimums against the activation sums for imin.
template <class Weights, class ScaledDot>
inline __m128 K45Terms(const Weights& u, const uint8_t* xb, ScaledDot scaled_dot) {
  const __m256i bsum = LoadY(xb + 260);
  __m256i isum[4], imin[4];
  for (int c = 0; c < 4; ++c) {
    isum[c] = scaled_dot(u.q[c], u.sc[c], xb + 4);
    imin[c] = _mm256_madd_epi16(bsum, u.mn[c]);
  }
  return CombineMin4(u.d, u.dmin, _mm_set1_ps(ActScale(xb)),
                     Hsum4(isum[0], isum[1], isum[2], isum[3]),
                     Hsum4(imin[0], imin[1], imin[2], imin[3]));
}

// A type's kernel K at one ISA gives: kElems (elements per block), kActBytes (prepared
// activation bytes per block), kWBytes (weight bytes per block), a Weights struct (4 rows'
// block, unpacked), Unpack(w, b, &u) for block b of the 4 rows w[0..3], and
// Contribution(u, xb) -> block b's float terms of the 4 columns against activation block xb.
template <class K>
void TileColumns(const K& kern, const uint8_t* const* w, int n_cols, const PreparedRow* x,
                 int n_rows, int64_t prefetch_ahead, float* out, int64_t out_stride) {
  Acc8Cols acc[kTileRows];
  typename K::Weights u;
  const int64_t nb = x[0].n / K::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0)
      for (int c = 0; c < 4; ++c)
        for (int off = 0; off < K::kWBytes; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(w[c] + b * K::kWBytes + prefetch_ahead + off),
                       _MM_HINT_T0);
    kern.Unpack(w, b, &u);
    for (int r = 0; r < n_rows; ++r)
      acc[r].Add(b, kern.Contribution(u, x[r].q.data() + b * K::kActBytes));
  }
  for (int r = 0; r < n_rows; ++r) acc[r].Store(n_cols, out + r * out_stride);
}

// DotTile for one type: row tiles outermost, then groups of 4 columns. Absent columns of the
// last group repeat its last row (computed, never stored). The first row tile prefetches the
// next group's rows (the matrix's rows are contiguous); later tiles find them in cache.
template <class K>
void Tile(const uint8_t* w, size_t row_bytes, int n_cols, const PreparedRow* x, int64_t n_rows,
          float* out, int64_t out_stride) {
  const K kern;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kTileRows, n_rows - r0));
    for (int c0 = 0; c0 < n_cols; c0 += 4) {
      const int nc = std::min(4, n_cols - c0);
      const uint8_t* wc[4];
      for (int c = 0; c < 4; ++c) wc[c] = w + (c0 + std::min(c, nc - 1)) * row_bytes;
      const int64_t ahead = r0 == 0 ? static_cast<int64_t>(4 * row_bytes) : 0;
      TileColumns(kern, wc, nc, x + r0, nr, ahead, out + r0 * out_stride + c0, out_stride);
    }
  }
}

}  // namespace
}  // namespace lockstep::quant::detail

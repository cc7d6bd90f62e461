// The shared pieces of the AVX2 kernels over packed weights (quant/packed.h): packed dword loads
// of one 8-column half, activation broadcasts, f16 lanes and the row-tile driver that adds every
// packing unit's block contributions into Acc8's partials. Include only from *_avx2.cpp files:
// everything is header-local (anonymous namespace), as in dot_x86.h.
#pragma once

#include <immintrin.h>

#include "quant/dot_x86.h"

namespace lockstep::quant::detail {

// The packed kernels of the 32-element block types and IQ4_XS (dot_packed_b32_avx2.cpp); nullptr
// for other types.
PackedFn Avx2PackedB32(DType t);

namespace {

// Packed dword m of a block's half (columns 8 h .. 8 h + 7 when blk points at byte 32 h):
// lane c holds column 8 h + c's dword.
inline __m256i Ld(const uint8_t* blk, int m) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 * m));
}
inline __m256i Bcast(const uint8_t* p) {
  return _mm256_set1_epi32(static_cast<int>(U32(p)));
}
inline __m256i Byte(__m256i v, int k) {
  return _mm256_and_si256(_mm256_srli_epi32(v, 8 * k), _mm256_set1_epi32(0xFF));
}
// An int16 value (in the low half of each int32 lane) in both int16 halves, for vpmaddwd.
inline __m256i Pair16(__m256i v) {
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}
// Pins a running sum to a register at this point: without it GCC reassociates a whole block's
// integer additions into one wide tree at its end (legal: integer sums are exact in any order),
// which keeps every product alive and spills them to the stack.
inline void Keep(__m256i& v) {
  asm("" : "+x"(v));
}
// The f16 in the low half of each int32 lane, as floats (exact conversion).
inline __m256 HalfLow(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(h));
}
inline __m256 HalfHigh(__m256i v) {
  return HalfLow(_mm256_srli_epi32(v, 16));
}

// The rows' activation blocks for one half: the empty asm hides that both halves read the same
// activations, so the compiler reloads each broadcast where it is used instead of hoisting
// every broadcast of the block out of the two halves into stack spills.
template <int R>
inline void Launder(const uint8_t* const* xb, const uint8_t** out) {
  for (int r = 0; r < R; ++r) {
    out[r] = xb[r];
    asm volatile("" : "+r"(out[r]));
  }
}

// A group is one sequential stream, which the hardware prefetcher alone brings in more slowly
// than the kernels consume it (matvec_bench, one row, one thread: Q4_K 14 -> 31 GB/s): each
// block asks for the lines of the block about kPrefetchBytes ahead. Only a group's first row
// tile asks (`prefetch`): the later tiles find the group in cache, and 36-53 prefetches a block
// were 4% of an AVX2 prefill.
inline constexpr int kPrefetchBytes = 4096;

// R rows (x[0..R-1]) against one group of nb packing units: unit by unit, each half's block
// contributions added to Acc8's partial b % 8 for their block index b (8 columns per vector),
// then Acc8's tree, lane by lane. A group of at most 8 columns skips its second half. K is as in
// dot_packed_avx512.h, plus kTileRows (its register tile).
template <class K, int R>
void RowTile(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, float* out,
             int64_t out_stride, bool prefetch) {
  const int halves = n_cols > 8 ? 2 : 1;
  __m256 acc[R][2][8];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (auto& half : acc[r])
      for (auto& v : half) v = _mm256_setzero_ps();
  constexpr int kU = K::kUnitBlocks;
  const uint8_t* xb[R];
  __m256 contrib[kU * R];
  for (int64_t b = 0; b < nb; ++b) {  // packing unit b: blocks kU b .. kU b + kU - 1
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xb[r] = x[r].q.data() + b * kU * K::kActBytes;
    const uint8_t* blk = grp + b * K::kBlockBytes;
    constexpr int64_t kAhead = (kPrefetchBytes + K::kBlockBytes - 1) / K::kBlockBytes;
    if (prefetch)
      for (int l = 0; l < K::kBlockBytes; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk + kAhead * K::kBlockBytes + l), _MM_HINT_T0);
    for (int h = 0; h < halves; ++h) {
      const uint8_t* xh[R];
      Launder<R>(xb, xh);
      K::template Block<R>(blk + 32 * h, xh, contrib);
      for (int j = 0; j < kU; ++j) {
        const int64_t p = (kU * b + j) & 7;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][h][p] = _mm256_add_ps(acc[r][h][p], contrib[j * R + r]);
      }
    }
  }
  // Each half's columns stored with a lane mask (a copy loop here became a memcpy call per
  // row and group: 5% of an AVX2 prefill).
  __m256i mask[2];
  for (int h = 0; h < halves; ++h)
    mask[h] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_cols - 8 * h),
                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < halves; ++h) {
      const __m256* a = acc[r][h];
      const __m256 s0 = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[1], a[5]));
      const __m256 s1 = _mm256_add_ps(_mm256_add_ps(a[2], a[6]), _mm256_add_ps(a[3], a[7]));
      _mm256_maskstore_ps(out + r * out_stride + 8 * h, mask[h], _mm256_add_ps(s0, s1));
    }
  }
}

template <class K>
void Packed(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, int64_t n_rows,
            float* out, int64_t out_stride) {
  constexpr int kT = K::kTileRows;
  int64_t r0 = 0;
  for (; r0 + kT <= n_rows; r0 += kT)
    RowTile<K, kT>(grp, nb, n_cols, x + r0, out + r0 * out_stride, out_stride, r0 == 0);
  const PreparedRow* xr = x + r0;
  float* o = out + r0 * out_stride;
  WithRowCount<kT>(n_rows - r0, [&]<int R>() {  // the leftover rows, fewer than kT
    RowTile<K, R>(grp, nb, n_cols, xr, o, out_stride, r0 == 0);
  });
}

}  // namespace
}  // namespace lockstep::quant::detail

// The shared pieces of the AVX-512 (VNNI) kernels over packed weights (quant/packed.h): packed
// dword loads, activation broadcasts and the row-tile driver that adds every packing unit's
// block contributions into Acc8's partials. Include only from *_avx512.cpp files: everything is
// header-local (anonymous namespace), as in dot_x86.h.
#pragma once

#include <immintrin.h>

#include "quant/dot_x86.h"

namespace lockstep::quant::detail {

// The packed kernels of the 32-element block types and IQ4_XS (dot_packed_b32_avx512.cpp);
// nullptr for other types.
PackedFn Avx512PackedB32(DType t);

namespace {

constexpr int kMaxTileRows = 8;  // activation rows per register tile

// Packed dword m of a block: lane c holds row c's.
inline __m512i Ld(const uint8_t* blk, int m) {
  return _mm512_load_si512(blk + 64 * m);
}
inline __m512i Bcast(const uint8_t* p) {
  return _mm512_set1_epi32(static_cast<int>(U32(p)));
}
// acc + the dot of each lane's 4 unsigned bytes of w with the 4 signed bytes at p: vpdpbusd
// with p as an embedded {1to16} broadcast operand. GCC 12 does not fold _mm512_set1_epi32 of a
// load into vpdpbusd, and a separate vpbroadcastd per dot is a third of a tile's instructions.
using U32Alias = uint32_t __attribute__((may_alias));
inline __m512i DotBcast(__m512i acc, __m512i w, const uint8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0"
      : "+v"(acc)
      : "v"(w), "m"(*reinterpret_cast<const U32Alias*>(p)));
  return acc;
}
inline __m512i Byte(__m512i v, int k) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

// A group is one sequential stream that the hardware prefetcher alone brings in more slowly
// than the kernels consume it: each block asks for the lines of the block about this far ahead.
// Only a group's first row tile asks (`prefetch`): the later tiles find the group in cache.
inline constexpr int kPrefetchBytes = 4096;

// R rows (x[0..R-1]) against one group of nb packing units: every block's contribution added
// to Acc8's partial b % 8 for its block index b (16 columns per vector), then Acc8's tree, lane
// by lane. K gives a unit's packed bytes (kBlockBytes), its blocks (kUnitBlocks), a block's
// activation bytes (kActBytes) and Block<R>, which writes block j's contribution for row r to
// contrib[j * R + r].
template <class K, int R>
void RowTile(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, float* out,
             int64_t out_stride, bool prefetch) {
  __m512 acc[R][8];
  for (int r = 0; r < R; ++r)
    for (auto& v : acc[r]) v = _mm512_setzero_ps();
  constexpr int kU = K::kUnitBlocks;
  const uint8_t* xb[R];
  __m512 contrib[kU * R];
  constexpr int64_t kAhead = (kPrefetchBytes + K::kBlockBytes - 1) / K::kBlockBytes;
  for (int64_t b = 0; b < nb; ++b) {  // packing unit b: blocks kU b .. kU b + kU - 1
    for (int r = 0; r < R; ++r) xb[r] = x[r].q.data() + b * kU * K::kActBytes;
    const uint8_t* blk = grp + b * K::kBlockBytes;
    if (prefetch)  // (a prefetch past the group never faults)
      for (int l = 0; l < K::kBlockBytes; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk + kAhead * K::kBlockBytes + l), _MM_HINT_T0);
    K::template Block<R>(blk, xb, contrib);
    for (int j = 0; j < kU; ++j) {
      const int64_t p = (kU * b + j) & 7;
      for (int r = 0; r < R; ++r) acc[r][p] = _mm512_add_ps(acc[r][p], contrib[j * R + r]);
    }
  }
  const auto mask = static_cast<__mmask16>((1u << n_cols) - 1);
  for (int r = 0; r < R; ++r) {
    const __m512* a = acc[r];
    const __m512 s0 = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[1], a[5]));
    const __m512 s1 = _mm512_add_ps(_mm512_add_ps(a[2], a[6]), _mm512_add_ps(a[3], a[7]));
    _mm512_mask_storeu_ps(out + r * out_stride, mask, _mm512_add_ps(s0, s1));
  }
}

template <class K>
void Packed(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, int64_t n_rows,
            float* out, int64_t out_stride) {
  int64_t r0 = 0;
  for (; r0 + kMaxTileRows <= n_rows; r0 += kMaxTileRows)
    RowTile<K, kMaxTileRows>(grp, nb, n_cols, x + r0, out + r0 * out_stride, out_stride, r0 == 0);
  const PreparedRow* xr = x + r0;
  float* o = out + r0 * out_stride;
  WithRowCount<kMaxTileRows>(
      n_rows - r0, [&]<int R>() { RowTile<K, R>(grp, nb, n_cols, xr, o, out_stride, r0 == 0); });
}

}  // namespace
}  // namespace lockstep::quant::detail

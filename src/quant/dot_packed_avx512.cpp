// AVX-512 (VNNI) kernels over packed weights (quant/packed.h) for the K-quants Q4_K, Q5_K and
// Q6_K, the packing code, and the level's choice of packed kernel (the 32-element block types
// and IQ4_XS: dot_packed_b32_avx512.cpp). One output column per int32 lane, any number of
// activation rows. A packed block holds dword m of 16 weight rows in one 64-byte line, so the
// unpacking the gathering tile kernels do (dot_tile_wide_avx512.cpp) runs on plain loads:
// vpdpbusd against 4 activation bytes broadcast to every lane adds each column's exact partial
// sums in its own lane. Rows go in register tiles of up to 8: a block's levels are unpacked once
// per tile and meet each row's activations there. Every lane forms the one-row kernel's exact
// integers, its per-block float expression (CombineMin / Combine, the same IEEE operations in
// the same order) and Acc8's partial b % 8, so each output equals DotRow bit for bit for any
// row count.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quant/dot_packed_avx512.h"
#include "quant/packed.h"

namespace lockstep::quant::detail {
namespace {

// Q4_K / Q5_K (kFive): packed dwords are the block's 36 / 44 (d/dmin, 3 of scales, Q5_K's 8 of
// high bits, 32 of nibbles). Q5_K's levels (0-31) are the nibble with bit 2p (low nibbles) or
// 2p + 1 (high) of the matching qh byte as bit 4; unsigned either way, as vpdpbusd wants.
template <bool kFive>
struct Q45K {
  static constexpr int kQs = kFive ? 12 : 4;  // first packed dword of the nibbles
  static constexpr int kBlockBytes = (kQs + 32) * 64;
  static constexpr int kUnitBlocks = 1;
  // Scales of sub-blocks 0..7, minimums as int16 pairs (to meet two adjacent activation sums
  // in vpdpwssd), d and dmin: UnpackK4Scales lane by lane.
  struct Scales {
    __m512i sc[8], mn2[8];
    __m512 d, dmin;
    explicit Scales(const uint8_t* blk) {
      const __m512i a0 = Ld(blk, 1), a1 = Ld(blk, 2), a2 = Ld(blk, 3);
      const __m512i k6 = _mm512_set1_epi32(0x3F3F3F3F), k4 = _mm512_set1_epi32(0x0F0F0F0F),
                    k2 = _mm512_set1_epi32(0x03030303);
      const __m512i sc_lo = _mm512_and_si512(a0, k6), mn_lo = _mm512_and_si512(a1, k6);
      const __m512i sc_hi =
          _mm512_or_si512(_mm512_and_si512(a2, k4),
                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a0, 6), k2), 4));
      const __m512i mn_hi =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), k4),
                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a1, 6), k2), 4));
      for (int j = 0; j < 8; ++j) {
        sc[j] = Byte(j < 4 ? sc_lo : sc_hi, j % 4);
        const __m512i m = Byte(j < 4 ? mn_lo : mn_hi, j % 4);
        mn2[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
      }
      const __m512i dd = Ld(blk, 0);
      d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
      dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    }
  };

  // Block contributions of R rows (xb[r]: the rows' activation blocks) into acc[r].
  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    const Scales s(blk);
    const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m10 = _mm512_set1_epi32(0x10101010);
    __m512i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {  // qs dwords 8p..8p+7: sub-block 2p (low), 2p + 1 (high)
      __m512i lo[8], hi[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i q = Ld(blk, kQs + 8 * p + i);
        lo[i] = _mm512_and_si512(q, m4);
        hi[i] = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
        if constexpr (kFive) {  // qh dword i: bit j of each byte is sub-block j's bit 4
          const __m512i h = _mm512_srli_epi32(Ld(blk, 4 + i), 2 * p);
          lo[i] = _mm512_or_si512(lo[i], _mm512_and_si512(_mm512_slli_epi32(h, 4), m10));
          hi[i] = _mm512_or_si512(hi[i], _mm512_and_si512(_mm512_slli_epi32(h, 3), m10));
        }
      }
      // Unrolled over the rows: each row's dots are 4 chains of 4 dependent vpdpbusd, too
      // short a window for the core to overlap with the next row's when the loop stays rolled
      // (its partial sums then also go through memory); unrolled, the Q4_K tile is 15% faster.
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* x = xb[r] + 4 + 64 * p;
        __m512i e0 = DotBcast(_mm512_setzero_si512(), lo[0], x);
        __m512i e1 = DotBcast(_mm512_setzero_si512(), lo[1], x + 4);
        __m512i o0 = DotBcast(_mm512_setzero_si512(), hi[0], x + 32);
        __m512i o1 = DotBcast(_mm512_setzero_si512(), hi[1], x + 36);
        for (int i = 2; i < 8; i += 2) {
          e0 = DotBcast(e0, lo[i], x + 4 * i);
          e1 = DotBcast(e1, lo[i + 1], x + 4 * i + 4);
          o0 = DotBcast(o0, hi[i], x + 32 + 4 * i);
          o1 = DotBcast(o1, hi[i + 1], x + 36 + 4 * i);
        }
        isum[r] = _mm512_add_epi32(
            isum[r],
            _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(e0, e1), s.sc[2 * p]),
                             _mm512_mullo_epi32(_mm512_add_epi32(o0, o1), s.sc[2 * p + 1])));
      }
    }
    for (int r = 0; r < R; ++r) {
      __m512i imin = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j)
        imin = _mm512_dpwssd_epi32(imin, s.mn2[j], Bcast(xb[r] + 260 + 4 * j));
      const __m512 dx = _mm512_set1_ps(ActScale(xb[r]));
      acc[r] = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(s.d, dx), _mm512_cvtepi32_ps(isum[r])),
                             _mm512_mul_ps(_mm512_mul_ps(s.dmin, dx), _mm512_cvtepi32_ps(imin)));
    }
  }
  static constexpr int kActBytes = kQ8x256Bytes;
};

// Rows up to this count unpack each packed dword of levels once for all four 32-element
// groups it feeds (8 accumulators a row); more rows unpack a group's levels once per group and
// share them over the rows. Integer sums are exact, so the two orders give the same integers.
inline constexpr int kFewRows = 2;

// Q6_K: packed dwords 0-31 ql, 32-47 qh, 48-51 the 16 int8 scales, 52 d (high half). Levels
// are stored plus 32: the exact integer is sum(scale * q . x) - 32 * sum(scale * bsum).
struct Q6K {
  static constexpr int kBlockBytes = 53 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kUnitBlocks = 1;

  static void LoadScales(const uint8_t* blk, __m512i* sc) {
    for (int g4 = 0; g4 < 4; ++g4) {
      const __m512i v = Ld(blk, 48 + g4);
      for (int t = 0; t < 4; ++t)
        sc[4 * g4 + t] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * t), 24);
    }
  }

  // acc = d * dx * (isum - 32 * sum(scale * bsum)): the one-row kernel's expression.
  static __m512 Finish(const uint8_t* blk, const __m512i* sc, const uint8_t* xb, __m512i isum) {
    __m512i corr = _mm512_setzero_si512();
    for (int i = 0; i < 8; ++i) {
      const __m512i sc2 = _mm512_or_si512(_mm512_and_si512(sc[2 * i], _mm512_set1_epi32(0xFFFF)),
                                          _mm512_slli_epi32(sc[2 * i + 1], 16));
      corr = _mm512_dpwssd_epi32(corr, sc2, Bcast(xb + 260 + 4 * i));
    }
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 5));
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(Ld(blk, 52), 16)));
    return _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ActScale(xb))), _mm512_cvtepi32_ps(total));
  }

  // Few rows: for each half h and dword i, the ql dwords i and 8 + i and the qh dword i give the
  // levels of all four 32-element groups k (low/high nibbles, qh bits 2k).
  template <int R>
  static void FewRows(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    __m512i sc[16];
    LoadScales(blk, sc);
    const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m30 = _mm512_set1_epi32(0x30303030);
    __m512i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      __m512i s[R][8];  // [k * 2 + i / 4]: the sum of scale group 8 h + 2 k + i / 4
      for (int r = 0; r < R; ++r)
        for (auto& v : s[r]) v = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m512i a = Ld(blk, 16 * h + i), b = Ld(blk, 16 * h + 8 + i),
                      hb = Ld(blk, 32 + 8 * h + i);
        // (lo & 0x0F) | (hb_shifted & 0x30): ternary-logic select with m4 as the mask.
        const __m512i q[4] = {
            _mm512_ternarylogic_epi32(m4, a, _mm512_and_si512(_mm512_slli_epi32(hb, 4), m30), 0xCA),
            _mm512_ternarylogic_epi32(m4, b, _mm512_and_si512(_mm512_slli_epi32(hb, 2), m30), 0xCA),
            _mm512_ternarylogic_epi32(m4, _mm512_srli_epi32(a, 4), _mm512_and_si512(hb, m30), 0xCA),
            _mm512_ternarylogic_epi32(m4, _mm512_srli_epi32(b, 4),
                                      _mm512_and_si512(_mm512_srli_epi32(hb, 2), m30), 0xCA)};
        for (int r = 0; r < R; ++r)
          for (int k = 0; k < 4; ++k)
            s[r][2 * k + i / 4] =
                DotBcast(s[r][2 * k + i / 4], q[k], xb[r] + 4 + 128 * h + 32 * k + 4 * i);
      }
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < 8; ++j)
          isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(s[r][j], sc[8 * h + j]));
    }
    for (int r = 0; r < R; ++r) acc[r] = Finish(blk, sc, xb[r], isum[r]);
  }
  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    if constexpr (R <= kFewRows) {
      FewRows<R>(blk, xb, acc);
      return;
    }
    __m512i sc[16];
    LoadScales(blk, sc);
    const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m3 = _mm512_set1_epi32(0x03030303);
    __m512i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {  // elements 128 h + 32 k .. + 31: scale groups 8h + 2k, + 1
        __m512i q[8];
        for (int i = 0; i < 8; ++i) {
          const __m512i src = Ld(blk, 16 * h + 8 * (k & 1) + i);
          const __m512i lo =
              k < 2 ? _mm512_and_si512(src, m4) : _mm512_and_si512(_mm512_srli_epi32(src, 4), m4);
          const __m512i hb =
              _mm512_and_si512(_mm512_srli_epi32(Ld(blk, 32 + 8 * h + i), 2 * k), m3);
          q[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hb, 4));
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* x = xb[r] + 4 + 128 * h + 32 * k;
          __m512i sa = DotBcast(_mm512_setzero_si512(), q[0], x);
          __m512i sb = DotBcast(_mm512_setzero_si512(), q[4], x + 16);
          for (int i = 1; i < 4; ++i) {
            sa = DotBcast(sa, q[i], x + 4 * i);
            sb = DotBcast(sb, q[4 + i], x + 16 + 4 * i);
          }
          isum[r] = _mm512_add_epi32(
              isum[r], _mm512_add_epi32(_mm512_mullo_epi32(sa, sc[8 * h + 2 * k]),
                                        _mm512_mullo_epi32(sb, sc[8 * h + 2 * k + 1])));
        }
      }
    for (int r = 0; r < R; ++r) acc[r] = Finish(blk, sc, xb[r], isum[r]);
  }
};

}  // namespace

void Avx512PackGroup(const uint8_t* rows, const int32_t* row_offset, const PackLayout& layout,
                     int64_t nb, uint8_t* dst) {
  const __m512i index = _mm512_loadu_si512(row_offset);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = rows + b * layout.block_bytes;
    for (int m = 0; m < layout.n_dwords; ++m, dst += 64) {
      __m512i v = _mm512_i32gather_epi32(index, blk + layout.offset[m], 1);
      if (layout.hi_offset[m] >= 0)  // two low halves merged
        v = _mm512_or_si512(
            _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)),
            _mm512_slli_epi32(_mm512_i32gather_epi32(index, blk + layout.hi_offset[m], 1), 16));
      _mm512_store_si512(dst, v);
    }
  }
}

PackedFn Avx512Packed(DType t) {
  switch (t) {
    case DType::Q4_K:
      return Packed<Q45K<false>>;
    case DType::Q5_K:
      return Packed<Q45K<true>>;
    case DType::Q6_K:
      return Packed<Q6K>;
    default:
      return Avx512PackedB32(t);
  }
}

}  // namespace lockstep::quant::detail

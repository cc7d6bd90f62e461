// AVX2 kernels over packed weights (quant/packed.h) for the K-quants Q4_K, Q5_K and Q6_K, the
// packing code, and the level's choice of packed kernel (the 32-element block types and IQ4_XS:
// dot_packed_b32_avx2.cpp), on the same 16-row groups as the AVX-512 kernels
// (dot_packed_avx512.cpp). A packed dword of a block is 64 bytes, columns 0-7 in its first 32
// and 8-15 in its second, so each half of a group runs as 8 int32 lanes, one output column per
// lane. Without VNNI a lane's 4-byte dot is vpmaddubsw (unsigned weight levels x signed
// activation bytes broadcast to every lane, two products per int16) and vpmaddwd; the int16
// sums are kept far from saturation (see each type), so the integers are exact and each lane
// forms the one-row kernel's integers, its per-block float expression (CombineMin / Combine,
// the same IEEE operations in the same order) and Acc8's partial b % 8: every output equals
// DotRow bit for bit for any row count.
#include <immintrin.h>

#include "quant/dot_packed_avx2.h"
#include "quant/packed.h"

namespace lockstep::quant::detail {
namespace {

// Q4_K / Q5_K (kFive): packed dwords are the block's 36 / 44 (d/dmin, 3 of scales, Q5_K's 8 of
// high bits, 32 of nibbles). Q4_K's levels are 0-15 against activations of at most 127 in
// magnitude: a vpmaddubsw pair is at most 2 x 15 x 127, and the 8 dwords of a sub-block add up
// in int16 to at most 16 x 15 x 127 = 30480 before vpmaddwd multiplies them by the sub-block's
// scale into int32: exact. Q5_K's levels (0-31: bit 4 from qh) would reach 62992 that way, so
// its sub-blocks go to int32 every 4 dwords (at most 8 x 31 x 127 = 31496 in int16).
template <bool kFive>
struct Q45K {
  static constexpr int kQs = kFive ? 12 : 4;  // first packed dword of the nibbles
  static constexpr int kBlockBytes = (kQs + 32) * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kUnitBlocks = 1;
  static constexpr int kTileRows = 4;
  static constexpr int kChunk = kFive ? 4 : 8;  // dwords added in int16 before vpmaddwd

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    // UnpackK4Scales lane by lane: sub-block scales and minimums, each as an int16 pair.
    __m256i sc2[8], mn2[8];
    {
      const __m256i a0 = Ld(blk, 1), a1 = Ld(blk, 2), a2 = Ld(blk, 3);
      const __m256i k6 = _mm256_set1_epi32(0x3F3F3F3F), k4 = _mm256_set1_epi32(0x0F0F0F0F),
                    k2 = _mm256_set1_epi32(0x03030303);
      const __m256i sc_lo = _mm256_and_si256(a0, k6), mn_lo = _mm256_and_si256(a1, k6);
      const __m256i sc_hi =
          _mm256_or_si256(_mm256_and_si256(a2, k4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a0, 6), k2), 4));
      const __m256i mn_hi =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), k4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a1, 6), k2), 4));
      for (int j = 0; j < 8; ++j) {
        sc2[j] = Pair16(Byte(j < 4 ? sc_lo : sc_hi, j % 4));
        mn2[j] = Pair16(Byte(j < 4 ? mn_lo : mn_hi, j % 4));
      }
    }
    const __m256i m4 = _mm256_set1_epi32(0x0F0F0F0F), m10 = _mm256_set1_epi32(0x10101010);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    // qs dwords 8p..8p+7: sub-block 2p (low), 2p + 1 (high), kChunk dwords at a time.
    for (int p = 0; p < 4; ++p)
      for (int i0 = 0; i0 < 8; i0 += kChunk) {
        __m256i el[R], eh[R];  // int16 sums of the two sub-blocks
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) el[r] = eh[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int i = i0; i < i0 + kChunk; ++i) {
          const __m256i q = Ld(blk, kQs + 8 * p + i);
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi32(q, 4), m4);
          if constexpr (kFive) {  // qh dword i: bit j of each byte is sub-block j's bit 4
            const __m256i h = _mm256_srli_epi32(Ld(blk, 4 + i), 2 * p);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi32(h, 4), m10));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi32(h, 3), m10));
          }
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const uint8_t* x = xb[r] + 4 + 64 * p + 4 * i;
            const __m256i pl = _mm256_maddubs_epi16(lo, Bcast(x));
            const __m256i ph = _mm256_maddubs_epi16(hi, Bcast(x + 32));
            el[r] = _mm256_add_epi16(el[r], pl);
            eh[r] = _mm256_add_epi16(eh[r], ph);
            Keep(el[r]);
            Keep(eh[r]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          isum[r] =
              _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_madd_epi16(el[r], sc2[2 * p]),
                                                         _mm256_madd_epi16(eh[r], sc2[2 * p + 1])));
      }
    const __m256i dd = Ld(blk, 0);
    const __m256 d = HalfLow(dd), dmin = HalfHigh(dd);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // Minimum j meets the 16-element activation sums 2j and 2j + 1.
      __m256i imin = _mm256_madd_epi16(mn2[0], Bcast(xb[r] + 260));
      for (int j = 1; j < 8; ++j)
        imin = _mm256_add_epi32(imin, _mm256_madd_epi16(mn2[j], Bcast(xb[r] + 260 + 4 * j)));
      const __m256 dx = _mm256_set1_ps(ActScale(xb[r]));
      out[r] = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(isum[r])),
                             _mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(imin)));
    }
  }
};

// Q6_K: packed dwords 0-31 ql, 32-47 qh, 48-51 the 16 int8 scales, 52 d (high half). Levels
// are stored plus 32 (0-63): a vpmaddubsw pair is at most 2 x 63 x 127 = 16002, two dwords add
// up in int16 to at most 32004 before vpmaddwd multiplies them by their 16-element group's
// scale into int32: exact. The -32 comes out as 32 x sum(scale x bsum), as in the one-row kernel.
struct Q6K {
  static constexpr int kBlockBytes = 53 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kUnitBlocks = 1;
  static constexpr int kTileRows = 6;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    __m256i sc2[16];  // scale g as an int16 pair
    __m256i scp[8];   // scales 2i (low int16) and 2i + 1 (high), against bsum dword i
    for (int g4 = 0; g4 < 4; ++g4) {
      const __m256i v = Ld(blk, 48 + g4);
      __m256i s[4];
      for (int t = 0; t < 4; ++t) {
        s[t] = _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * t), 24);
        sc2[4 * g4 + t] = Pair16(s[t]);
      }
      scp[2 * g4] = _mm256_or_si256(_mm256_and_si256(s[0], _mm256_set1_epi32(0xFFFF)),
                                    _mm256_slli_epi32(s[1], 16));
      scp[2 * g4 + 1] = _mm256_or_si256(_mm256_and_si256(s[2], _mm256_set1_epi32(0xFFFF)),
                                        _mm256_slli_epi32(s[3], 16));
    }
    const __m256i m4 = _mm256_set1_epi32(0x0F0F0F0F), m3 = _mm256_set1_epi32(0x03030303);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {  // elements 128 h + 32 k .. + 31: scale groups 8h + 2k, + 1
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
          __m256i q[2];
          for (int j = 0; j < 2; ++j) {
            const __m256i src = Ld(blk, 16 * h + 8 * (k & 1) + i + j);
            const __m256i lo =
                k < 2 ? _mm256_and_si256(src, m4) : _mm256_and_si256(_mm256_srli_epi32(src, 4), m4);
            const __m256i hb =
                _mm256_and_si256(_mm256_srli_epi32(Ld(blk, 32 + 8 * h + i + j), 2 * k), m3);
            q[j] = _mm256_or_si256(lo, _mm256_slli_epi32(hb, 4));
          }
          const __m256i sc = sc2[8 * h + 2 * k + i / 4];
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const uint8_t* x = xb[r] + 4 + 128 * h + 32 * k + 4 * i;
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], Bcast(x)),
                                               _mm256_maddubs_epi16(q[1], Bcast(x + 4)));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s, sc));
            Keep(isum[r]);
          }
        }
      }
    const __m256 d = HalfHigh(Ld(blk, 52));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256i corr = _mm256_madd_epi16(scp[0], Bcast(xb[r] + 260));
      for (int i = 1; i < 8; ++i)
        corr = _mm256_add_epi32(corr, _mm256_madd_epi16(scp[i], Bcast(xb[r] + 260 + 4 * i)));
      const __m256i total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(corr, 5));
      out[r] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r]))),
                             _mm256_cvtepi32_ps(total));
    }
  }
};

}  // namespace

void Avx2PackGroup(const uint8_t* rows, const int32_t* row_offset, const PackLayout& layout,
                   int64_t nb, uint8_t* dst) {
  const __m256i i0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_offset));
  const __m256i i1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_offset + 8));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = rows + b * layout.block_bytes;
    for (int m = 0; m < layout.n_dwords; ++m, dst += 64) {
      const auto* base = reinterpret_cast<const int*>(blk + layout.offset[m]);
      __m256i v0 = _mm256_i32gather_epi32(base, i0, 1), v1 = _mm256_i32gather_epi32(base, i1, 1);
      if (layout.hi_offset[m] >= 0) {  // two low halves merged
        const auto* hi = reinterpret_cast<const int*>(blk + layout.hi_offset[m]);
        const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
        v0 = _mm256_or_si256(_mm256_and_si256(v0, lo16),
                             _mm256_slli_epi32(_mm256_i32gather_epi32(hi, i0, 1), 16));
        v1 = _mm256_or_si256(_mm256_and_si256(v1, lo16),
                             _mm256_slli_epi32(_mm256_i32gather_epi32(hi, i1, 1), 16));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst), v0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), v1);
    }
  }
}

PackedFn Avx2Packed(DType t) {
  switch (t) {
    case DType::Q4_K:
      return Packed<Q45K<false>>;
    case DType::Q5_K:
      return Packed<Q45K<true>>;
    case DType::Q6_K:
      return Packed<Q6K>;
    default:
      return Avx2PackedB32(t);
  }
}

}  // namespace lockstep::quant::detail

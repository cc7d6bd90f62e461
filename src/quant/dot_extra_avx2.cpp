// AVX2 dot kernels for Q4_1, Q5_0, Q5_1, Q2_K, Q3_K. Only the exact integer block sums are
// vectorized; the per-block float composition and Acc8 reduction are the shared scalar ones, so
// results equal the portable kernels bit for bit.
#include <immintrin.h>

#include <cstring>

#include "quant/dot_extra.h"
#include "quant/dot_x86.h"

namespace lockstep::quant::detail {
namespace {

// Lane k of the result is the horizontal sum of v[k]: one transposing reduction for 8 blocks
// instead of 8 separate horizontal sums.
inline __m256i Hsum8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

inline __m256i Ones16() {
  return _mm256_set1_epi16(1);
}
// int32 pair sums of unsigned (0..127) x signed int8 products; exact (no int16 saturation for
// weight levels up to 31 against |x| <= 127).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), Ones16());
}
inline __m256i DotS8S8(__m256i w, __m256i x) {
  return DotU8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// ---- 32-element blocks (Q4_1, Q5_0, Q5_1) ----

// Byte e = 16 if bit e of qh is set, else 0.
inline __m256i FifthBits(uint32_t qh) {
  const __m256i spread =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), spread);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

enum class B32 { kQ4_1, kQ5_0, kQ5_1 };
template <B32 K>
struct B32Traits {
  static constexpr int kBytes = K == B32::kQ4_1   ? kQ4_1Bytes
                                : K == B32::kQ5_0 ? kQ5_0Bytes
                                                  : kQ5_1Bytes;
  static constexpr bool kMin = K != B32::kQ5_0;  // has the offset term (needs xsum)
};

// The int32 pair-sum vectors of one block: *vi sums to isum, *vx to xsum (min types only).
template <B32 K>
inline void BlockVectors(const uint8_t* wb, const uint8_t* xb, __m256i* vi, __m256i* vx) {
  const __m256i xv = LoadY(xb + 4);
  if constexpr (K == B32::kQ4_1) {
    *vi = DotU8S8(LoadNibbles(wb + 4), xv);
  } else if constexpr (K == B32::kQ5_0) {
    const __m256i q = _mm256_or_si256(LoadNibbles(wb + 6), FifthBits(U32(wb + 2)));
    *vi = DotS8S8(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), xv);
  } else {
    *vi = DotU8S8(_mm256_or_si256(LoadNibbles(wb + 8), FifthBits(U32(wb + 4))), xv);
  }
  if constexpr (B32Traits<K>::kMin) *vx = DotU8S8(_mm256_set1_epi8(1), xv);
}

template <B32 K>
inline float BlockFloat(const uint8_t* wb, const uint8_t* xb, int32_t isum, int32_t xsum) {
  if constexpr (B32Traits<K>::kMin)
    return CombineAddMin(Half(wb), Half(wb + 2), ExtraActScale(xb), isum, xsum);
  else
    return Combine(Half(wb), ExtraActScale(xb), isum);
}

template <B32 K>
float Dot32(const uint8_t* w, const PreparedRow& x) {
  constexpr int kBytes = B32Traits<K>::kBytes;
  const int64_t nb = x.n / 32;
  const uint8_t* xq = x.q.data();
  Acc8 acc;
  int64_t b = 0;
  // Groups of 8 blocks share one transposing reduction; the float work stays per block.
  for (; b + 8 <= nb; b += 8) {
    __m256i vi[8], vx[8];
    for (int k = 0; k < 8; ++k)
      BlockVectors<K>(w + (b + k) * kBytes, xq + (b + k) * kQ8x32Bytes, &vi[k], &vx[k]);
    alignas(32) int32_t isum[8], xsum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    _mm256_store_si256(reinterpret_cast<__m256i*>(isum), Hsum8(vi));
    if constexpr (B32Traits<K>::kMin)
      _mm256_store_si256(reinterpret_cast<__m256i*>(xsum), Hsum8(vx));
    for (int k = 0; k < 8; ++k)
      acc.Add(b + k,
              BlockFloat<K>(w + (b + k) * kBytes, xq + (b + k) * kQ8x32Bytes, isum[k], xsum[k]));
  }
  for (; b < nb; ++b) {
    const uint8_t* wb = w + b * kBytes;
    const uint8_t* xb = xq + b * kQ8x32Bytes;
    __m256i vi, vx;
    BlockVectors<K>(wb, xb, &vi, &vx);
    int32_t isum, xsum = 0;
    if constexpr (B32Traits<K>::kMin)
      Hsum2(vi, vx, &isum, &xsum);
    else
      isum = Hsum(vi);
    acc.Add(b, BlockFloat<K>(wb, xb, isum, xsum));
  }
  return acc.Sum();
}

// ---- K-quants (Q2_K, Q3_K): 16 sub-blocks of 16 with their own scale ----

// Shuffle for step s of a half: the low lane takes int16 scale 2s, the high lane 2s + 1 (the
// two 16-element sub-blocks of that 32-element step).
inline __m256i ScaleShuffle(int s) {
  const auto lo = static_cast<int16_t>((4 * s + 1) << 8 | (4 * s));
  const auto hi = static_cast<int16_t>((4 * s + 3) << 8 | (4 * s + 2));
  return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}
// The 16 int16 sub-block scales as two vectors, each holding 8 of them in both lanes.
inline void SplitScales(__m256i sc16, __m256i* half0, __m256i* half1) {
  *half0 = _mm256_permute2x128_si256(sc16, sc16, 0x00);
  *half1 = _mm256_permute2x128_si256(sc16, sc16, 0x11);
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], f16 d, f16 dmin. Quant byte
// 32*half + l holds elements 128*half + 32*s + l at bits 2s..2s+1. The scales are applied to
// the int16 pair sums with madd, so a block needs one horizontal reduction.
float DotQ2_K(const uint8_t* w, const PreparedRow& x) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0xF);
  const __m256i shuf[4] = {ScaleShuffle(0), ScaleShuffle(1), ScaleShuffle(2), ScaleShuffle(3)};
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 84;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    const __m256i vmin = _mm256_madd_epi16(mins, LoadY(xb + 260));  // against bsum[16]
    __m256i sc[2];
    SplitScales(_mm256_cvtepu8_epi16(_mm_and_si128(sm, m4)), &sc[0], &sc[1]);
    __m256i vsum = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i q = LoadY(wb + 16 + 32 * half);
      const __m256i qv[4] = {q, _mm256_srli_epi16(q, 2), _mm256_srli_epi16(q, 4),
                             _mm256_srli_epi16(q, 6)};
      for (int s = 0; s < 4; ++s) {
        const __m256i xv = LoadY(xb + 4 + 128 * half + 32 * s);
        const __m256i p = _mm256_maddubs_epi16(_mm256_and_si256(qv[s], m3), xv);
        vsum = _mm256_add_epi32(vsum, _mm256_madd_epi16(_mm256_shuffle_epi8(sc[half], shuf[s]), p));
      }
    }
    int32_t isum, imin;
    Hsum2(vsum, vmin, &isum, &imin);
    acc.Add(b, CombineMin(Half(wb + 80), Half(wb + 82), ExtraActScale(xb), isum, imin));
  }
  return acc.Sum();
}

// Q3_K's 16 six-bit scales minus 32, as int16. Byte i: low nibble from s[i % 8] (i < 8: low,
// else high nibble), bits 4..5 from s[8 + i % 4] >> 2 * (i / 4). Built in registers: a scalar
// unpack through memory would stall store forwarding on every block.
inline __m256i Q3Scales(const uint8_t* s) {
  const __m128i m4 = _mm_set1_epi8(0xF);
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
  const __m128i lo =
      _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
  const __m128i h =
      _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(U32(s + 8))), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i hi = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi8(3)), 4);
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32)));
}

// Q3_K: hmask[32], qs[64], scales[12], f16 d. Level = u - 4 with u = low 2 bits | high bit << 2
// (0..7), so isum = sum_g sc[g] * sum u*x  -  4 * sum_g sc[g] * bsum[g]: the same integer as
// the portable kernel, with one unsigned maddubs per 32 elements.
float DotQ3_K(const uint8_t* w, const PreparedRow& x) {
  const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  const __m256i shuf[4] = {ScaleShuffle(0), ScaleShuffle(1), ScaleShuffle(2), ScaleShuffle(3)};
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 110;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const __m256i sc16 = Q3Scales(wb + 96);
    const __m256i vcorr = _mm256_madd_epi16(sc16, LoadY(xb + 260));  // against bsum[16]
    __m256i sc[2];
    SplitScales(sc16, &sc[0], &sc[1]);
    const __m256i hm = LoadY(wb);
    __m256i vsum = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i q = LoadY(wb + 32 + 32 * half);
      const __m256i qv[4] = {q, _mm256_srli_epi16(q, 2), _mm256_srli_epi16(q, 4),
                             _mm256_srli_epi16(q, 6)};
      // Element 128*half + 32*s + l takes bit 4*half + s of hmask[l], moved here to bit 2 (the
      // 16-bit shifts by -2..1 bring nothing from the neighbouring byte into bit 2).
      const __m256i hh = half ? _mm256_srli_epi16(hm, 4) : hm;
      const __m256i hv[4] = {_mm256_slli_epi16(hh, 2), _mm256_slli_epi16(hh, 1), hh,
                             _mm256_srli_epi16(hh, 1)};
      for (int s = 0; s < 4; ++s) {
        const __m256i xv = LoadY(xb + 4 + 128 * half + 32 * s);
        const __m256i u =
            _mm256_or_si256(_mm256_and_si256(qv[s], m3), _mm256_and_si256(hv[s], four));
        const __m256i p = _mm256_maddubs_epi16(u, xv);  // |pair| <= 2*7*127: exact in int16
        vsum = _mm256_add_epi32(vsum, _mm256_madd_epi16(_mm256_shuffle_epi8(sc[half], shuf[s]), p));
      }
    }
    int32_t isum, corr;
    Hsum2(vsum, vcorr, &isum, &corr);
    acc.Add(b, Combine(Half(wb + 108), ExtraActScale(xb), isum - 4 * corr));
  }
  return acc.Sum();
}

}  // namespace

RowDotFn Avx2DotExtra(DType t) {
  switch (t) {
    case DType::Q4_1:
      return Dot32<B32::kQ4_1>;
    case DType::Q5_0:
      return Dot32<B32::kQ5_0>;
    case DType::Q5_1:
      return Dot32<B32::kQ5_1>;
    case DType::Q2_K:
      return DotQ2_K;
    case DType::Q3_K:
      return DotQ3_K;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

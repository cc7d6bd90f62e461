// AVX-512 (F, BW, VL, DQ, VNNI) tile kernels for DotTile with 4 columns per tile: Q5_K and the
// nibble types (Q4_0, IQ4_NL, MXFP4); Q4_K, Q6_K and Q8_0 have a column per lane
// (dot_tile_wide_avx512.cpp). Integer sums as in dot_avx512.cpp, but each weight block's
// unpacking (nibble split, scale widening, level lookup) is done once for a tile of rows and
// moved to the weight side, so every activation row is used as loaded.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quant/dot_tile_x86.h"

namespace lockstep::quant::detail {
namespace {

inline __m512i LoadZ(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}
inline __m256i Fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}
// int16 lane index vector: lanes 0..15 -> a, 16..31 -> b.
inline __m512i SplitIndex(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)),
                            _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
}
// sum over k of scale[k] * (levels[k] . x[k]) for 64-element vectors k: two chains of two.
inline __m256i ScaledDot4(const __m512i* q, const __m512i* sc, const uint8_t* x) {
  const __m512i z = _mm512_setzero_si512();
  __m512i a = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(q[0], LoadZ(x)), sc[0]);
  __m512i b = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(q[2], LoadZ(x + 128)), sc[2]);
  a = _mm512_dpwssd_epi32(a, _mm512_maddubs_epi16(q[1], LoadZ(x + 64)), sc[1]);
  b = _mm512_dpwssd_epi32(b, _mm512_maddubs_epi16(q[3], LoadZ(x + 192)), sc[3]);
  return Fold(_mm512_add_epi32(a, b));
}

// Q4_K / Q5_K: vector k holds elements 64k..64k+63 (sub-blocks 2k and 2k+1: low then high
// nibbles of the same 32 bytes, Q5_K's fifth bit j of qh[l] added), with sub-block scales
// widened to int16 lanes 0-15 / 16-31.
template <bool kFive>
struct Q45K {
  static constexpr int kElems = 256, kActBytes = kQ8x256Bytes, kWBytes = kFive ? 176 : 144;
  static constexpr int kQs = kFive ? 48 : 16;
  struct Weights {
    __m512i q[4][4], sc[4][4];
    __m256i mn[4];
    __m128 d, dmin;
  };
  __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  __m256i mctl = K4MinControl();
  // Q5_K: per-vector shifts that bring bit 2k (lanes 0-15) / 2k+1 (16-31) of qh to bit 0.
  __m512i hshift[4] = {SplitIndex(0, 1), SplitIndex(2, 3), SplitIndex(4, 5), SplitIndex(6, 7)};
  // vpshufb controls that widen scale bytes 2k, 2k+1 (broadcast) into int16 lanes 0-15, 16-31.
  __m512i sctl[4] = {SplitIndex(0x8000, 0x8001), SplitIndex(0x8002, 0x8003),
                     SplitIndex(0x8004, 0x8005), SplitIndex(0x8006, 0x8007)};
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    for (int c = 0; c < 4; ++c) {
      const uint8_t* wb = w[c] + b * kWBytes;
      uint64_t sc, mn;
      UnpackK4Scales(wb + 4, &sc, &mn);
      for (int h = 0; h < 2; ++h) {
        const __m512i q = LoadZ(wb + kQs + 64 * h);
        const __m512i lo = _mm512_and_si512(q, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        u->q[c][2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
        u->q[c][2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
      }
      if constexpr (kFive) {
        const __m512i qh = _mm512_broadcast_i64x4(LoadY(wb + 16));
        for (int k = 0; k < 4; ++k) {
          const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(qh, hshift[k]), one);
          u->q[c][k] = _mm512_or_si512(u->q[c][k], _mm512_slli_epi16(bit, 4));
        }
      }
      const __m512i sb = _mm512_set1_epi64(static_cast<long long>(sc));
      for (int k = 0; k < 4; ++k)
        u->sc[c][k] = _mm512_shuffle_epi8(sb, sctl[k]);
      u->mn[c] = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(mn)), mctl);
    }
    u->d = Halves4Of(w, b * kWBytes);
    u->dmin = Halves4Of(w, b * kWBytes + 2);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    return K45Terms(u, xb, ScaledDot4);
  }
};

// 32-element blocks with int8 levels (Q8_0's bytes, or a nibble table lookup): vpdpbusd on
// x + 128 (unsigned) against the signed levels, started from -128 * (sum of levels), which is
// the same exact integer as levels . x.
template <class Block>
struct Block32 {
  static constexpr int kElems = 32, kActBytes = kQ8x32Bytes, kWBytes = Block::kBytes;
  struct Weights {
    __m256i lv[4], start[4];
    __m128 d;
  };
  Block blk;
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    const __m256i ones = _mm256_set1_epi8(1), z = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      u->lv[c] = blk.Levels(w[c] + b * kWBytes);
      u->start[c] = _mm256_sub_epi32(z, _mm256_slli_epi32(_mm256_dpbusd_epi32(z, ones, u->lv[c]), 7));
    }
    u->d = blk.ColScales4(w, b);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    const __m256i xu = _mm256_xor_si256(LoadY(xb + 4), _mm256_set1_epi8(static_cast<char>(0x80)));
    __m256i s[4];
    for (int c = 0; c < 4; ++c) s[c] = _mm256_dpbusd_epi32(u.start[c], xu, u.lv[c]);
    return Combine4(u.d, _mm_set1_ps(ActScale(xb)), Hsum4(s[0], s[1], s[2], s[3]));
  }
};

}  // namespace

TileFn Avx512Tile(DType t) {
  if (TileFn wide = Avx512WideTile(t)) return wide;  // a column per lane where there is one
  switch (t) {
    case DType::Q5_K:
      return Tile<Q45K<true>>;
    case DType::Q4_0:
      return Tile<Block32<NibbleBlock<Nib::kQ4_0>>>;
    case DType::IQ4_NL:
      return Tile<Block32<NibbleBlock<Nib::kIq4Nl>>>;
    case DType::MXFP4:
      return Tile<Block32<NibbleBlock<Nib::kMxfp4>>>;
    default:
      return nullptr;  // IQ4_XS, ...: the AVX2 tile kernels where they exist
  }
}

}  // namespace lockstep::quant::detail

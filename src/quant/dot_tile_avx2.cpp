// AVX2 tile kernels for DotTile: Q4_K, Q5_K, Q6_K, IQ4_XS and the 32-element types (Q8_0, Q4_0, IQ4_NL,
// MXFP4). Each weight block is unpacked once for a tile of rows into levels in the activations'
// element order and int16 scale vectors, so a (row, column) pair costs vpmaddubsw + vpmaddwd per
// 32 elements and one shared reduction, with dot_avx2.cpp's exact integers.
#include <immintrin.h>

#include "quant/dot_tile_x86.h"

namespace lockstep::quant::detail {
namespace {

// sum over j of scale[j] * (levels[j] . x[j]) for 32-element vectors j: two chains.
inline __m256i ScaledDot8(const __m256i* q, const __m256i* sc, const uint8_t* x) {
  __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(q[0], LoadY(x)), sc[0]);
  __m256i b = _mm256_madd_epi16(_mm256_maddubs_epi16(q[1], LoadY(x + 32)), sc[1]);
  for (int j = 2; j < 8; j += 2) {
    a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], LoadY(x + 32 * j)), sc[j]));
    b = _mm256_add_epi32(
        b, _mm256_madd_epi16(_mm256_maddubs_epi16(q[j + 1], LoadY(x + 32 * j + 32)), sc[j + 1]));
  }
  return _mm256_add_epi32(a, b);
}

// Q4_K / Q5_K: vector j is sub-block j (low nibbles of 32 bytes for even j, high for odd;
// Q5_K's fifth bit j of qh[l] added), its scale in every int16 lane.
template <bool kFive>
struct Q45K {
  static constexpr int kElems = 256, kActBytes = kQ8x256Bytes, kWBytes = kFive ? 176 : 144;
  static constexpr int kQs = kFive ? 48 : 16;
  struct Weights {
    __m256i q[4][8], sc[4][8], mn[4];
    __m128 d, dmin;
  };
  __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256i mctl = K4MinControl();
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    for (int c = 0; c < 4; ++c) {
      const uint8_t* wb = w[c] + b * kWBytes;
      uint64_t sc, mn;
      UnpackK4Scales(wb + 4, &sc, &mn);
      for (int p = 0; p < 4; ++p) {
        const __m256i q = LoadY(wb + kQs + 32 * p);
        u->q[c][2 * p] = _mm256_and_si256(q, m4);
        u->q[c][2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      }
      if constexpr (kFive) {
        const __m256i qh = LoadY(wb + 16);
        for (int j = 0; j < 8; ++j) {
          const __m256i bit =
              _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
          u->q[c][j] = _mm256_or_si256(u->q[c][j], _mm256_slli_epi16(bit, 4));
        }
      }
      for (int j = 0; j < 8; ++j)
        u->sc[c][j] = _mm256_set1_epi16(static_cast<int16_t>((sc >> (8 * j)) & 0xFF));
      u->mn[c] = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(mn)), mctl);
    }
    u->d = Halves4Of(w, b * kWBytes);
    u->dmin = Halves4Of(w, b * kWBytes + 2);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    return K45Terms(u, xb, ScaledDot8);
  }
};

// Q6_K: vector j covers elements 32j..32j+31 as levels 0..63 (the -32 applied exactly through
// the activation sums); its two 16-element groups' scales fill int16 lanes 0-7 and 8-15.
struct Q6K {
  static constexpr int kElems = 256, kActBytes = kQ8x256Bytes, kWBytes = 210;
  struct Weights {
    __m256i q[4][8], sc[4][8], sc16[4];
    __m128 d;
  };
  __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    for (int c = 0; c < 4; ++c) {
      const uint8_t* wb = w[c] + b * kWBytes;
      const auto* sc = reinterpret_cast<const int8_t*>(wb + 192);
      for (int half = 0; half < 2; ++half) {
        const __m256i qa = LoadY(wb + 64 * half), qb = LoadY(wb + 64 * half + 32);
        const __m256i qh = LoadY(wb + 128 + 32 * half);
        for (int k = 0; k < 4; ++k) {
          const __m256i src = (k & 1) ? qb : qa;
          const __m256i lo =
              k < 2 ? _mm256_and_si256(src, m4) : _mm256_and_si256(_mm256_srli_epi16(src, 4), m4);
          const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m3);
          const int j = 4 * half + k;
          u->q[c][j] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
          u->sc[c][j] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1]), _mm_set1_epi16(sc[2 * j]));
        }
      }
      u->sc16[c] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    }
    u->d = Halves4Of(w, b * kWBytes + 208);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    const __m256i bsum = LoadY(xb + 260);
    __m256i isum[4], corr[4];
    for (int c = 0; c < 4; ++c) {
      isum[c] = ScaledDot8(u.q[c], u.sc[c], xb + 4);
      corr[c] = _mm256_madd_epi16(bsum, u.sc16[c]);
    }
    return Combine4(u.d, _mm_set1_ps(ActScale(xb)),
                    Minus32(Hsum4(isum[0], isum[1], isum[2], isum[3]),
                            Hsum4(corr[0], corr[1], corr[2], corr[3])));
  }
};

// IQ4_XS: eight sub-blocks of 32 table levels (signed: |level| against the activation with the
// level's sign), each with a 6-bit scale minus 32 in every int16 lane.
struct Iq4Xs {
  static constexpr int kElems = 256, kActBytes = kQ8x256Bytes, kWBytes = 136;
  struct Weights {
    __m256i lv[4][8], mag[4][8], sc[4][8];
    __m128 d;
  };
  __m256i table = NibbleTable<Nib::kIq4Nl>();
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    for (int c = 0; c < 4; ++c) {
      const uint8_t* wb = w[c] + b * kWBytes;
      const int sh = Bits16(wb + 2);
      for (int j = 0; j < 8; ++j) {
        const int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((sh >> (2 * j)) & 3) << 4);
        u->lv[c][j] = NibbleLevels(wb + 8 + 16 * j, table);
        u->mag[c][j] = _mm256_sign_epi8(u->lv[c][j], u->lv[c][j]);
        u->sc[c][j] = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
      }
    }
    u->d = Halves4Of(w, b * kWBytes);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    __m256i isum[4];
    for (int c = 0; c < 4; ++c) {
      __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
      for (int j = 0; j < 8; j += 2) {
        const __m256i x0 = LoadY(xb + 4 + 32 * j), x1 = LoadY(xb + 36 + 32 * j);
        a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(
                                    u.mag[c][j], _mm256_sign_epi8(x0, u.lv[c][j])), u.sc[c][j]));
        b = _mm256_add_epi32(
            b, _mm256_madd_epi16(
                   _mm256_maddubs_epi16(u.mag[c][j + 1], _mm256_sign_epi8(x1, u.lv[c][j + 1])),
                   u.sc[c][j + 1]));
      }
      isum[c] = _mm256_add_epi32(a, b);
    }
    return Combine4(u.d, _mm_set1_ps(ActScale(xb)), Hsum4(isum[0], isum[1], isum[2], isum[3]));
  }
};

// 32-element blocks with int8 levels: |level| against the activation with the level's sign
// (dot_avx2.cpp's DotS8S8), the magnitudes taken once per block.
template <class Block>
struct Block32 {
  static constexpr int kElems = 32, kActBytes = kQ8x32Bytes, kWBytes = Block::kBytes;
  struct Weights {
    __m256i lv[4], mag[4];
    __m128 d;
  };
  Block blk;
  void Unpack(const uint8_t* const* w, int64_t b, Weights* u) const {
    for (int c = 0; c < 4; ++c) {
      u->lv[c] = blk.Levels(w[c] + b * kWBytes);
      u->mag[c] = _mm256_sign_epi8(u->lv[c], u->lv[c]);
    }
    u->d = blk.ColScales4(w, b);
  }
  __m128 Contribution(const Weights& u, const uint8_t* xb) const {
    const __m256i x = LoadY(xb + 4), ones = _mm256_set1_epi16(1);
    __m256i s[4];
    for (int c = 0; c < 4; ++c)
      s[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(u.mag[c], _mm256_sign_epi8(x, u.lv[c])), ones);
    return Combine4(u.d, _mm_set1_ps(ActScale(xb)), Hsum4(s[0], s[1], s[2], s[3]));
  }
};

}  // namespace

TileFn Avx2Tile(DType t) {
  switch (t) {
    case DType::Q4_K:
      return Tile<Q45K<false>>;
    case DType::Q5_K:
      return Tile<Q45K<true>>;
    case DType::Q6_K:
      return Tile<Q6K>;
    case DType::IQ4_XS:
      return Tile<Iq4Xs>;
    case DType::Q8_0:
      return Tile<Block32<Q8_0Block>>;
    case DType::Q4_0:
      return Tile<Block32<NibbleBlock<Nib::kQ4_0>>>;
    case DType::IQ4_NL:
      return Tile<Block32<NibbleBlock<Nib::kIq4Nl>>>;
    case DType::MXFP4:
      return Tile<Block32<NibbleBlock<Nib::kMxfp4>>>;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

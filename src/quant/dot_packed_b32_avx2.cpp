// AVX2 kernels over packed weights (quant/packed.h) for the types with 32-element blocks of
// byte or nibble-table levels, Q8_0, Q4_0 and MXFP4, and for IQ4_XS (nibble-table levels in
// 256-element blocks). As in dot_packed_avx2.cpp, one output column per int32 lane of each
// 8-column half, vpmaddubsw / vpmaddwd with the int16 sums bounded below saturation (see each
// type): each lane forms the one-row kernel's exact integers, Combine lane by lane and Acc8's
// partial b % 8, so each output equals DotRow bit for bit.
#include <immintrin.h>

#include "quant/dot_packed_avx2.h"

namespace lockstep::quant::detail {
namespace {

// Q8_0: packed dword 0 holds d (low half), 1-8 the 32 int8 levels. Signed x signed as
// dot_avx2.cpp's DotS8S8: |level| (0-128, unsigned) against the activation with the level's
// sign; activations are at most 127 in magnitude, so a pair is at most 2 x 128 x 127 = 32512
// (no saturation) and each dword goes to int32 on its own through vpmaddwd with ones.
struct Q80 {
  static constexpr int kBlockBytes = 9 * 64;
  static constexpr int kActBytes = kQ8x32Bytes;
  static constexpr int kUnitBlocks = 1;
  static constexpr int kTileRows = 8;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i lv = Ld(blk, 1 + i), mag = _mm256_abs_epi8(lv);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i x = _mm256_sign_epi8(Bcast(xb[r] + 4 + 4 * i), lv);
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), ones));
        Keep(s[r]);
      }
    }
    const __m256 d = HalfLow(Ld(blk, 0));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      out[r] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r]))),
                             _mm256_cvtepi32_ps(s[r]));
  }
};
// MXFP4's E8M0 block scales e (one per int32 lane, 0-255) halved, lane by lane: E8M0Half's bits.
inline __m256 E8M0HalfLanes(__m256i e) {
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

// Q4_0 and MXFP4, two blocks a unit: packed dword 0 holds both blocks' scales (Q4_0: d of block
// j in half j; MXFP4: the E8M0 byte of block j in byte 2 j), 1-4 block 0's 16 bytes of nibbles,
// 5-8 block 1's (dword i: elements 4 i .. 4 i + 3 in the low nibbles, 16 + 4 i .. in the high).
// The table levels (Q4_0: nibble - 8, -8..7; MXFP4: -12..12) go in as |level| against the
// activation with the level's sign, as Q8_0's: a pair is at most 2 x 12 x 127 and a block's 8
// dwords add up in int16 to at most 16 x 12 x 127 = 24384 before vpmaddwd with ones: exact.
template <Nib kKind>
struct Nib32 {
  static constexpr int kBlockBytes = 9 * 64;
  static constexpr int kActBytes = kQ8x32Bytes;
  static constexpr int kUnitBlocks = 2;
  static constexpr int kTileRows = 8;

  static __m256 Scale(__m256i d0, int j) {
    if constexpr (kKind == Nib::kMxfp4)
      return E8M0HalfLanes(Byte(d0, 2 * j));
    else
      return j ? HalfHigh(d0) : HalfLow(d0);
  }
  // out[j * R + r]: block j's contribution for row r.
  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i table = NibbleTable<kKind>();
    const __m256i d0 = Ld(blk, 0);
    for (int j = 0; j < 2; ++j) {
      __m256i s[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i q = Ld(blk, 1 + 4 * j + i % 4);
        const __m256i lv =
            _mm256_shuffle_epi8(table, _mm256_and_si256(i < 4 ? q : _mm256_srli_epi32(q, 4), m4));
        const __m256i mag = _mm256_abs_epi8(lv);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x = _mm256_sign_epi8(Bcast(xb[r] + j * kActBytes + 4 + 4 * i), lv);
          s[r] = _mm256_add_epi16(s[r], _mm256_maddubs_epi16(mag, x));
          Keep(s[r]);
        }
      }
      const __m256 d = Scale(d0, j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        out[j * R + r] =
            _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r] + j * kActBytes))),
                          _mm256_cvtepi32_ps(_mm256_madd_epi16(s[r], ones)));
    }
  }
};

// IQ4_XS: packed dwords are the block's 34 (d and the scales' high bits, the scales' low
// nibbles, 32 of nibbles: sub-block ib in dwords 2 + 4 ib .. 5 + 4 ib, elements as Q4_0's).
// Table levels (-127..113) go in as |level| against the activation with the level's sign, as
// the one-row kernel's: a pair is at most 2 x 127 x 127 = 32258, so each dword goes to int32 on
// its own through vpmaddwd with the sub-block's scale ls - 32 (-32..31).
struct Iq4Xs {
  static constexpr int kBlockBytes = 34 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kUnitBlocks = 1;
  static constexpr int kTileRows = 4;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i table = NibbleTable<Nib::kIq4Nl>();
    const __m256i d0 = Ld(blk, 0), sl = Ld(blk, 1), sh = _mm256_srli_epi32(d0, 16);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i ls = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi32(sl, 4 * ib), _mm256_set1_epi32(0xF)),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sh, 2 * ib), _mm256_set1_epi32(3)),
                            4));
      const __m256i sc2 = Pair16(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i q = Ld(blk, 2 + 4 * ib + i % 4);
        const __m256i lv =
            _mm256_shuffle_epi8(table, _mm256_and_si256(i < 4 ? q : _mm256_srli_epi32(q, 4), m4));
        const __m256i mag = _mm256_abs_epi8(lv);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x = _mm256_sign_epi8(Bcast(xb[r] + 4 + 32 * ib + 4 * i), lv);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), sc2));
          Keep(isum[r]);
        }
      }
    }
    const __m256 d = HalfLow(d0);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      out[r] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r]))),
                             _mm256_cvtepi32_ps(isum[r]));
  }
};

}  // namespace

PackedFn Avx2PackedB32(DType t) {
  switch (t) {
    case DType::Q8_0:
      return Packed<Q80>;
    case DType::Q4_0:
      return Packed<Nib32<Nib::kQ4_0>>;
    case DType::MXFP4:
      return Packed<Nib32<Nib::kMxfp4>>;
    case DType::IQ4_XS:
      return Packed<Iq4Xs>;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

// AVX-512 (VNNI) kernels over packed weights (quant/packed.h) for the types with 32-element
// blocks of byte or nibble-table levels, Q8_0, Q4_0 and MXFP4, and for IQ4_XS (nibble-table
// levels in 256-element blocks). As in dot_packed_avx512.cpp, one output column per int32 lane:
// each lane forms the one-row kernel's exact integers, Combine lane by lane and Acc8's partial
// b % 8, so each output equals DotRow bit for bit.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quant/dot_packed_avx512.h"
#include "quant/iq_tables.h"

namespace lockstep::quant::detail {
namespace {

// 32 signed int8 levels lv (8 dwords, element 4 i + t in byte t of lv[i]) with scale d against
// R rows' Q8x32 blocks xb[r]: out[r] = Combine lane by lane. vpdpbusd runs on x + 128 (unsigned)
// from a start of -128 x the sum of levels, which gives levels . x exactly.
template <int R>
inline void SignedBlock32(const __m512i* lv, __m512 d, const uint8_t* const* xb, __m512* out) {
  __m512i sum = _mm512_setzero_si512();
  for (int i = 0; i < 8; ++i) sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), lv[i]);
  const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int r = 0; r < R; ++r) {
    __m512i s = start;
    for (int i = 0; i < 8; ++i)
      s = _mm512_dpbusd_epi32(s, _mm512_xor_si512(Bcast(xb[r] + 4 + 4 * i), bias), lv[i]);
    out[r] =
        _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ActScale(xb[r]))), _mm512_cvtepi32_ps(s));
  }
}

// Q8_0: packed dword 0 holds d (low half), 1-8 the 32 int8 levels.
struct Q80 {
  static constexpr int kBlockBytes = 9 * 64;
  static constexpr int kActBytes = kQ8x32Bytes;
  static constexpr int kUnitBlocks = 1;
  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    __m512i lv[8];
    for (int i = 0; i < 8; ++i) lv[i] = Ld(blk, 1 + i);
    SignedBlock32<R>(lv, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(Ld(blk, 0))), xb, acc);
  }
};
// MXFP4's E8M0 block scales e (one per int32 lane, 0-255) halved, lane by lane: E8M0Half's bits.
inline __m512 E8M0HalfLanes(__m512i e) {
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

// Q4_0 and MXFP4, two blocks a unit: packed dword 0 holds both blocks' scales (Q4_0: d of block
// j in half j; MXFP4: the E8M0 byte of block j in byte 2 j), 1-4 block 0's 16 bytes of nibbles,
// 5-8 block 1's. Nibble dword i holds elements 4 i .. 4 i + 3 (low nibbles) and 16 + 4 i ..
// (high); the levels are the type's 16-entry table at the nibble (Q4_0: nibble - 8).
template <Nib kKind>
struct Nib32 {
  static constexpr int kBlockBytes = 9 * 64;
  static constexpr int kActBytes = kQ8x32Bytes;
  static constexpr int kUnitBlocks = 2;

  static __m512 Scale(__m512i d0, int j) {
    if constexpr (kKind == Nib::kMxfp4)
      return E8M0HalfLanes(Byte(d0, 2 * j));
    else
      return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(j ? _mm512_srli_epi32(d0, 16) : d0));
  }
  // acc[j * R + r]: block j's contribution for row r.
  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(NibbleTable<kKind>()));
    const __m512i d0 = Ld(blk, 0);
    for (int j = 0; j < 2; ++j) {
      __m512i lv[8];
      for (int i = 0; i < 4; ++i) {
        const __m512i q = Ld(blk, 1 + 4 * j + i);
        lv[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
        lv[4 + i] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
      }
      const uint8_t* xj[R];
      for (int r = 0; r < R; ++r) xj[r] = xb[r] + j * kActBytes;
      SignedBlock32<R>(lv, Scale(d0, j), xj, acc + j * R);
    }
  }
};

// IQ4_XS: packed dwords are the block's 34 (d and the scales' high bits, the scales' low
// nibbles, 32 of nibbles: sub-block ib in dwords 2 + 4 ib .. 5 + 4 ib, elements as Q4_0's).
// The table levels go in plus 128 (unsigned, as vpdpbusd wants): sum(ls (S_ib - 128 xsum_ib))
// with S_ib the biased sums and xsum_ib the sub-block's activation sum (two 16-element bsums)
// is the one-row kernel's sum(ls s_ib) exactly, ls = the 6-bit scale - 32.
struct Iq4Xs {
  static constexpr int kBlockBytes = 34 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kUnitBlocks = 1;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m512* acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i table =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm256_castsi256_si128(NibbleTable<Nib::kIq4Nl>())),
                         _mm512_set1_epi8(static_cast<char>(0x80)));  // level + 128
    const __m512i d0 = Ld(blk, 0), sl = Ld(blk, 1), sh = _mm512_srli_epi32(d0, 16);
    __m512i ls[8], isum[R];
    for (int ib = 0; ib < 8; ++ib)
      ls[ib] = _mm512_sub_epi32(
          _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi32(sl, 4 * ib), _mm512_set1_epi32(0xF)),
              _mm512_slli_epi32(
                  _mm512_and_si512(_mm512_srli_epi32(sh, 2 * ib), _mm512_set1_epi32(3)), 4)),
          _mm512_set1_epi32(32));
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ++ib) {
      __m512i u[8];
      for (int i = 0; i < 4; ++i) {
        const __m512i q = Ld(blk, 2 + 4 * ib + i);
        u[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
        u[4 + i] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
      }
      for (int r = 0; r < R; ++r) {
        const uint8_t* x = xb[r] + 4 + 32 * ib;
        __m512i sa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], Bcast(x));
        __m512i sb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[4], Bcast(x + 16));
        for (int i = 1; i < 4; ++i) {
          sa = _mm512_dpbusd_epi32(sa, u[i], Bcast(x + 4 * i));
          sb = _mm512_dpbusd_epi32(sb, u[4 + i], Bcast(x + 16 + 4 * i));
        }
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(_mm512_add_epi32(sa, sb), ls[ib]));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d0));
    for (int r = 0; r < R; ++r) {
      // bsum dword ib holds the sums of elements 32 ib .. + 15 and + 16 .. + 31.
      __m512i corr = _mm512_setzero_si512();
      for (int ib = 0; ib < 8; ++ib)
        corr =
            _mm512_dpwssd_epi32(corr,
                                _mm512_or_si512(_mm512_and_si512(ls[ib], _mm512_set1_epi32(0xFFFF)),
                                                _mm512_slli_epi32(ls[ib], 16)),
                                Bcast(xb[r] + 260 + 4 * ib));
      const __m512i total = _mm512_sub_epi32(isum[r], _mm512_slli_epi32(corr, 7));
      acc[r] = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ActScale(xb[r]))),
                             _mm512_cvtepi32_ps(total));
    }
  }
};

}  // namespace

PackedFn Avx512PackedB32(DType t) {
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

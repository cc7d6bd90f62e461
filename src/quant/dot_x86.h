// x86 SIMD helpers shared by the AVX2 and AVX-512 dot kernels. Include only from *_avx2.cpp /
// *_avx512.cpp files: everything is header-local (anonymous namespace), so each ISA's
// translation unit compiles its own copy and no wider-ISA body can be linked into a narrower
// caller.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/dot_internal.h"
#include "quant/iq_tables.h"

namespace lockstep::quant::detail {
namespace {

inline uint16_t Bits16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
inline float Half(const uint8_t* p) {
  return _cvtsh_ss(Bits16(p));  // f16 -> f32 is exact, same value as HalfToFloat
}
inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// Prepared activation block fields (layouts in dot_internal.h).
inline float ActScale(const uint8_t* blk) {
  float d;
  std::memcpy(&d, blk, 4);
  return d;
}
inline int32_t ActBsum(const uint8_t* blk, int g) {
  int16_t s;
  std::memcpy(&s, blk + 260 + 2 * g, 2);
  return s;
}
// Eight F32 (kBytes 4) or F16 (kBytes 2) weights from element i, as floats (exact).
template <int kBytes>
inline __m256 LoadW(const uint8_t* w, int64_t i) {
  if constexpr (kBytes == 4)
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w + 4 * i));
  else
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
}
inline __m256i LoadY(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline int32_t Hsum128(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return _mm_cvtsi128_si32(v);
}
inline int32_t Hsum(__m256i v) {
  return Hsum128(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}
// Horizontal sums of two int32 vectors with one shared reduction.
inline void Hsum2(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // per lane: a01 a23 b01 b23
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);  // a b a b
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

// 16 bytes -> 32 nibbles (low nibbles first, then high nibbles).
inline __m256i LoadNibbles(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

// 32-element types whose weight level is a table lookup of a nibble (Q4_0 levels: nibble - 8).
enum class Nib { kQ4_0, kIq4Nl, kMxfp4 };
template <Nib kKind>
inline __m256i NibbleTable() {
  __m128i t;
  if constexpr (kKind == Nib::kQ4_0)
    t = _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  else if constexpr (kKind == Nib::kIq4Nl)
    t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables::kIq4nlValues));
  else
    t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables::kMxfp4Values));
  return _mm256_set_m128i(t, t);
}
// MXFP4's E8M0 block scale, halved (its levels are stored doubled), exactly as dequantized.
inline float E8M0Half(uint8_t e8) {
  const uint32_t e = e8;
  const uint32_t bits = e < 2 ? (0x00200000u << e) : ((e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
template <Nib kKind>
inline float NibbleScale(const uint8_t* wb) {
  if constexpr (kKind == Nib::kMxfp4)
    return E8M0Half(wb[0]);
  else
    return Half(wb);
}
template <Nib kKind>
constexpr int NibbleBlockBytes() {
  return kKind == Nib::kMxfp4 ? 17 : 18;
}
template <Nib kKind>
constexpr int NibbleQsOffset() {
  return kKind == Nib::kMxfp4 ? 1 : 2;
}

}  // namespace
}  // namespace lockstep::quant::detail

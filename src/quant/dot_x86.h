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

// Calls f.template operator()<R>() with R == n for 1 <= n < kMax (the leftover rows of a
// register-tiled loop, each count its own instantiation); does nothing otherwise.
template <int kMax, class F>
inline void WithRowCount(int64_t n, F&& f) {
  if constexpr (kMax > 1) {
    if (n == kMax - 1) return f.template operator()<kMax - 1>();
    WithRowCount<kMax - 1>(n, f);
  }
}

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

// Pieces of the several-rows-per-call kernels (dot_avx512.cpp, dot_tile_*.cpp).

// 16 bytes of nibbles -> 32 signed levels (low nibbles first) through a 16-entry table.
inline __m256i NibbleLevels(const uint8_t* p, __m256i table) {
  return _mm256_shuffle_epi8(table, LoadNibbles(p));
}

// Four f16 scales at a byte stride, as floats (exact conversion).
inline __m128 Halves4(const uint8_t* p, int stride) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(Bits16(p)),
                                     static_cast<int16_t>(Bits16(p + stride)),
                                     static_cast<int16_t>(Bits16(p + 2 * stride)),
                                     static_cast<int16_t>(Bits16(p + 3 * stride)), 0, 0, 0, 0));
}
// The f16 at byte `off` of four rows, row c in lane c.
inline __m128 Halves4Of(const uint8_t* const* w, int64_t off) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(Bits16(w[0] + off)),
                                     static_cast<int16_t>(Bits16(w[1] + off)),
                                     static_cast<int16_t>(Bits16(w[2] + off)),
                                     static_cast<int16_t>(Bits16(w[3] + off)), 0, 0, 0, 0));
}
inline __m128 ActScales4(const uint8_t* xb, int stride) {
  return _mm_setr_ps(ActScale(xb), ActScale(xb + stride), ActScale(xb + 2 * stride),
                     ActScale(xb + 3 * stride));
}

// Sums of the 8 int32 lanes of four vectors, in vector order.
inline __m128i Hsum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
// (dw * dx) * float(isum), lane by lane: Combine for four blocks.
inline __m128 Combine4(__m128 dw, __m128 dx, __m128i isum) {
  return _mm_mul_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(isum));
}

// The 32-element, one-scale block types: Q8_0 (int8 levels) and the nibble types (levels by
// table lookup). Each gives its block size, levels and scale(s).
struct Q8_0Block {
  static constexpr int kBytes = 34;
  __m256i Levels(const uint8_t* wb) const { return LoadY(wb + 2); }
  float Scale(const uint8_t* wb) const { return Half(wb); }
  __m128 Scales4(const uint8_t* wb) const { return Halves4(wb, kBytes); }
  // The scales of block b of four weight rows, row c in lane c.
  __m128 ColScales4(const uint8_t* const* w, int64_t b) const { return Halves4Of(w, b * kBytes); }
};
template <Nib kKind>
struct NibbleBlock {
  static constexpr int kBytes = NibbleBlockBytes<kKind>();
  __m256i table = NibbleTable<kKind>();
  __m256i Levels(const uint8_t* wb) const {
    return NibbleLevels(wb + NibbleQsOffset<kKind>(), table);
  }
  float Scale(const uint8_t* wb) const { return NibbleScale<kKind>(wb); }
  __m128 Scales4(const uint8_t* wb) const {
    if constexpr (kKind == Nib::kMxfp4)
      return _mm_setr_ps(E8M0Half(wb[0]), E8M0Half(wb[kBytes]), E8M0Half(wb[2 * kBytes]),
                         E8M0Half(wb[3 * kBytes]));
    else
      return Halves4(wb, kBytes);
  }
  __m128 ColScales4(const uint8_t* const* w, int64_t b) const {
    const int64_t off = b * kBytes;
    if constexpr (kKind == Nib::kMxfp4)
      return _mm_setr_ps(E8M0Half(w[0][off]), E8M0Half(w[1][off]), E8M0Half(w[2][off]),
                         E8M0Half(w[3][off]));
    else
      return Halves4Of(w, off);
  }
};

// Q4_K's 12 scale bytes -> eight 6-bit scales (bytes of *sc) and eight 6-bit mins (*mn).
inline void UnpackK4Scales(const uint8_t* q, uint64_t* sc, uint64_t* mn) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, q, 4);
  std::memcpy(&a1, q + 4, 4);
  std::memcpy(&a2, q + 8, 4);
  constexpr uint32_t k6 = 0x3F3F3F3F, k4 = 0x0F0F0F0F, k2 = 0x03030303;
  const uint32_t sc_hi = (a2 & k4) | (((a0 >> 6) & k2) << 4);
  const uint32_t mn_hi = ((a2 >> 4) & k4) | (((a1 >> 6) & k2) << 4);
  *sc = (a0 & k6) | (uint64_t{sc_hi} << 32);
  *mn = (a1 & k6) | (uint64_t{mn_hi} << 32);
}

// vpshufb control that widens min byte i / 2 of a broadcast 64-bit word into int16 lane i
// (each Q4_K min covers two 16-element activation sums); high byte 0x80 selects zero.
inline __m256i K4MinControl() {
  alignas(32) int16_t v[16];
  for (int i = 0; i < 16; ++i) v[i] = static_cast<int16_t>(0x8000 | (i / 2));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(v));
}

// Acc8 for up to four rows with row c in lane c: block b's contributions go to partial b % 8
// and are reduced by Acc8's tree, each lane doing exactly the scalar operations.
struct Acc8Cols {
  __m128 a[8];
  Acc8Cols() {
    for (auto& v : a) v = _mm_setzero_ps();
  }
  void Add(int64_t b, __m128 v) { a[b & 7] = _mm_add_ps(a[b & 7], v); }
  void Store(int n_cols, float* out) const {
    const __m128 s0 = _mm_add_ps(_mm_add_ps(a[0], a[4]), _mm_add_ps(a[1], a[5]));
    const __m128 s1 = _mm_add_ps(_mm_add_ps(a[2], a[6]), _mm_add_ps(a[3], a[7]));
    alignas(16) float r[4];
    _mm_store_ps(r, _mm_add_ps(s0, s1));
    for (int c = 0; c < n_cols; ++c) out[c] = r[c];
  }
};

// The f16 at byte `off` of each row's block, row c in lane c (0 for absent rows).
template <int kCols>
inline __m128 ColHalves(const uint8_t* const* w, int64_t off) {
  auto h = [&](int c) { return c < kCols ? static_cast<int16_t>(Bits16(w[c] + off)) : 0; };
  return _mm_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), 0, 0, 0, 0));
}

}  // namespace
}  // namespace lockstep::quant::detail

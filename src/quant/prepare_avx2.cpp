// AVX2 activation quantization for PrepareRow (Q8 blocks of 32 and of 256 with 16-element sums):
// eight lanes at a time, each lane the portable code's IEEE operations (one multiply by the
// block's reciprocal scale, truncation, the half-away step) and the same integer sums, so the
// prepared bytes are identical at every level (QuantPrepare.* tests every level).
#include <immintrin.h>

#include <cstring>

#include "quant/dot_internal.h"

namespace lockstep::quant::detail {
namespace {

// The largest |x[i]| of n (a multiple of 8) floats, NaNs skipped as std::max(amax, |x|) skips
// them: vmaxps returns its second operand when either is NaN. Every value is +0 or more, so the
// lanes' maxima give the sequential maximum whatever the order.
float AbsMax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = 0.0f;
  for (float v : lanes) amax = amax < v ? v : amax;
  return amax;
}

// q[i] = int8(RoundHalfAway(x[i] * id)) for 32 elements: truncate toward zero, then step away
// from zero when the dropped fraction is at least one half; the int8 keeps the low byte, as
// the portable static_cast does.
void Levels32(const float* x, __m256 id, int8_t* q) {
  const __m256 half = _mm256_set1_ps(0.5f), neg_half = _mm256_set1_ps(-0.5f);
  __m256i v[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), id);
    const __m256i t = _mm256_cvttps_epi32(s);
    const __m256 f = _mm256_sub_ps(s, _mm256_cvtepi32_ps(t));
    // A true compare is -1: t + (f >= 0.5) - (f <= -0.5).
    const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(f, half, _CMP_GE_OQ));
    const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(f, neg_half, _CMP_LE_OQ));
    v[j] =
        _mm256_and_si256(_mm256_add_epi32(_mm256_sub_epi32(t, up), down), _mm256_set1_epi32(0xFF));
  }
  // Low bytes 0-255 pack without saturation; the packs interleave 128-bit lanes, the
  // permutation puts the dwords back in order.
  const __m256i w01 = _mm256_packus_epi32(v[0], v[1]), w23 = _mm256_packus_epi32(v[2], v[3]);
  const __m256i b = _mm256_packus_epi16(w01, w23);
  const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
}

// The block's scale (Q8Scale of its largest magnitude) and its reciprocal in every lane.
inline float BlockScale(const float* x, int n, __m256* id) {
  float inv;
  const float d = Q8Scale(AbsMax(x, n), &inv);
  *id = _mm256_set1_ps(inv);
  return d;
}

}  // namespace

void PrepareQ8x32Avx2(const float* x, int64_t n_blocks, uint8_t* out) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, out += kQ8x32Bytes) {
    __m256 id;
    const float d = BlockScale(x, 32, &id);
    std::memcpy(out, &d, 4);
    Levels32(x, id, reinterpret_cast<int8_t*>(out + 4));
  }
}

void PrepareQ8x256Avx2(const float* x, int64_t n_blocks, uint8_t* out) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256, out += kQ8x256Bytes) {
    __m256 id;
    const float d = BlockScale(x, 256, &id);
    std::memcpy(out, &d, 4);
    auto* q = reinterpret_cast<int8_t*>(out + 4);
    for (int j = 0; j < 8; ++j) Levels32(x + 32 * j, id, q + 32 * j);
    // Sums of 16 levels (at most 2,032 in magnitude: exact in int16): byte pairs, then pairs
    // of those, then two horizontal adds leave group 2j in dword 0 of the low 128 bits and
    // group 2j + 1 in dword 0 of the high.
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int j = 0; j < 8; ++j) {
      const __m256i lv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j));
      __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, lv), ones16);
      s = _mm256_hadd_epi32(s, s);
      s = _mm256_hadd_epi32(s, s);
      const auto lo = static_cast<int16_t>(_mm256_extract_epi32(s, 0));
      const auto hi = static_cast<int16_t>(_mm256_extract_epi32(s, 4));
      std::memcpy(out + 260 + 4 * j, &lo, 2);
      std::memcpy(out + 262 + 4 * j, &hi, 2);
    }
  }
}

}  // namespace lockstep::quant::detail

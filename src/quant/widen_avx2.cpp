// AVX2 (F16C) widening of F16 and BF16 rows to f32 for WidenHalfRow: eight elements a step, the
// bits of core/half.h's HalfToFloat / BF16ToFloat for every input. The hardware conversion is
// exact for every finite half and infinity, but it quiets a signalling NaN, which the software
// conversion keeps: those lanes get their quiet bit cleared again (WidenHalf.* checks all 65,536
// inputs at every level).
#include <immintrin.h>

#include <cstdint>

#include "quant/quant_internal.h"

namespace lockstep::quant::detail {

void WidenHalfRowAvx2(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i));
    const __m256i wide = _mm256_cvtepu16_epi32(h);
    __m256i bits;
    if (t == DType::BF16) {
      bits = _mm256_slli_epi32(wide, 16);
    } else {
      bits = _mm256_castps_si256(_mm256_cvtph_ps(h));
      // Signalling NaN: exponent all ones, quiet bit clear, some other mantissa bit set.
      const __m256i nan_exp = _mm256_cmpeq_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x7E00)),
                                                 _mm256_set1_epi32(0x7C00));
      const __m256i payload_zero =
          _mm256_cmpeq_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x1FF)), zero);
      const __m256i snan = _mm256_andnot_si256(payload_zero, nan_exp);
      bits = _mm256_andnot_si256(_mm256_and_si256(snan, _mm256_set1_epi32(0x00400000)), bits);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bits);
  }
}

}  // namespace lockstep::quant::detail

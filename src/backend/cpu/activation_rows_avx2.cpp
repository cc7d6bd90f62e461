// AVX2 activation rows: backend/activations.h's Tanh and GeluTanh, four lanes at a time, each
// lane the scalar function's IEEE operations in its order and precision (no FMA: the build
// forbids contraction, and only separate multiplies and adds are written here).
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"

namespace lockstep::backend::detail {
namespace {

// 1 - 2 / (e^y + 1) for y = 2a (a <= 10): the scalar code's reduction, polynomial and 2^k.
__m256d TanhLarge(__m256d a) {
  const __m256d y = _mm256_add_pd(a, a);
  // static_cast<int>(y * log2(e) + 0.5): truncation toward zero.
  const __m128i k = _mm256_cvttpd_epi32(
      _mm256_add_pd(_mm256_mul_pd(y, _mm256_set1_pd(1.4426950408889634)), _mm256_set1_pd(0.5)));
  const __m256d kd = _mm256_cvtepi32_pd(k);
  const __m256d r =
      _mm256_sub_pd(_mm256_sub_pd(y, _mm256_mul_pd(kd, _mm256_set1_pd(6.93147180369123816490e-01))),
                    _mm256_mul_pd(kd, _mm256_set1_pd(1.90821492927058770002e-10)));
  const double kPoly[] = {
      1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
      1.0 / 24.0,      1.0 / 6.0,      0.5,           1.0,          1.0};
  __m256d p = _mm256_set1_pd(1.0 / 39916800.0);
  for (double c : kPoly) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(c));
  // 2^k as a float (exact), widened.
  const __m128i bits = _mm_slli_epi32(_mm_add_epi32(k, _mm_set1_epi32(127)), 23);
  const __m256d scale = _mm256_cvtps_pd(_mm_castsi128_ps(bits));
  const __m256d one = _mm256_set1_pd(1.0);
  return _mm256_sub_pd(
      one, _mm256_div_pd(_mm256_set1_pd(2.0), _mm256_add_pd(_mm256_mul_pd(p, scale), one)));
}

// a + a^3 s(a^2), the odd series for a < 0.125.
__m256d TanhSmall(__m256d a) {
  const __m256d a2 = _mm256_mul_pd(a, a);
  const double kOdd[] = {-1382.0 / 155925.0, 62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0};
  __m256d s = _mm256_set1_pd(21844.0 / 6081075.0);
  for (double c : kOdd) s = _mm256_add_pd(_mm256_mul_pd(s, a2), _mm256_set1_pd(c));
  return _mm256_add_pd(a, _mm256_mul_pd(a, _mm256_mul_pd(a2, s)));
}

// Tanh of four floats (see Tanh in backend/activations.h for the method and constants). A side
// of the final choice that no lane takes is skipped: the lanes' results are the same either way.
__m128 Tanh4(__m128 x) {
  const __m128 sign_mask = _mm_set1_ps(-0.0f);
  const __m128 ax = _mm_andnot_ps(sign_mask, x);
  // ax < 10 ? ax : 10 (a NaN compares false and becomes 10, as in the scalar code).
  const __m128 lt10 = _mm_cmp_ps(ax, _mm_set1_ps(10.0f), _CMP_LT_OQ);
  const __m256d a = _mm256_cvtps_pd(_mm_blendv_ps(_mm_set1_ps(10.0f), ax, lt10));
  const __m256d pick_small = _mm256_cmp_pd(a, _mm256_set1_pd(0.125), _CMP_LT_OQ);
  const int small = _mm256_movemask_pd(pick_small);
  __m256d mag;
  if (small == 0)
    mag = TanhLarge(a);
  else if (small == 0xF)
    mag = TanhSmall(a);
  else
    mag = _mm256_blendv_pd(TanhLarge(a), TanhSmall(a), pick_small);
  // copysignf(float(mag), x)
  return _mm_or_ps(_mm_andnot_ps(sign_mask, _mm256_cvtpd_ps(mag)), _mm_and_ps(sign_mask, x));
}

}  // namespace

void GeluMulRowAvx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m128 k_sqrt_2_over_pi = _mm_set1_ps(0.7978845608028654f), c = _mm_set1_ps(0.044715f);
  const __m128 half = _mm_set1_ps(0.5f), one = _mm_set1_ps(1.0f);
  for (int64_t i = 0; i + 4 <= n; i += 4) {
    const __m128 x = _mm_loadu_ps(gate + i);
    // 0.5f * x * (1.0f + Tanh(k * (x + 0.044715f * x * x * x))) * up, left to right.
    const __m128 cube = _mm_mul_ps(_mm_mul_ps(_mm_mul_ps(c, x), x), x);
    const __m128 t = Tanh4(_mm_mul_ps(k_sqrt_2_over_pi, _mm_add_ps(x, cube)));
    const __m128 gelu = _mm_mul_ps(_mm_mul_ps(half, x), _mm_add_ps(one, t));
    _mm_storeu_ps(out + i, _mm_mul_ps(gelu, _mm_loadu_ps(up + i)));
  }
}

void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n) {
  const __m128 c = _mm_set1_ps(cap);
  for (int64_t i = 0; i + 4 <= n; i += 4)
    _mm_storeu_ps(out + i, _mm_mul_ps(c, Tanh4(_mm_div_ps(_mm_loadu_ps(x + i), c))));
}

}  // namespace lockstep::backend::detail

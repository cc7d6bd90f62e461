// AVX2 activation rows: backend/activations.h's Tanh and GeluTanh, four lanes at a time, each
// lane the scalar function's IEEE operations in its order and precision (no FMA: the build
// forbids contraction, and only separate multiplies and adds are written here).
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/tanh_lanes_x86.h"

namespace lockstep::backend::detail {
namespace {

// The four-lane double steps of tanh_lanes_x86.h.
struct Lanes4 {
  using D = __m256d;
  using I = __m128i;
  static D Set(double v) { return _mm256_set1_pd(v); }
  static D Add(D a, D b) { return _mm256_add_pd(a, b); }
  static D Sub(D a, D b) { return _mm256_sub_pd(a, b); }
  static D Mul(D a, D b) { return _mm256_mul_pd(a, b); }
  static D Div(D a, D b) { return _mm256_div_pd(a, b); }
  static I Trunc(D a) { return _mm256_cvttpd_epi32(a); }
  static D Widen(I k) { return _mm256_cvtepi32_pd(k); }
  static D Pow2(I k) {
    return _mm256_cvtps_pd(
        _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(k, _mm_set1_epi32(127)), 23)));
  }
};

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
    mag = TanhLarge<Lanes4>(a);
  else if (small == 0xF)
    mag = TanhSmall<Lanes4>(a);
  else
    mag = _mm256_blendv_pd(TanhLarge<Lanes4>(a), TanhSmall<Lanes4>(a), pick_small);
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

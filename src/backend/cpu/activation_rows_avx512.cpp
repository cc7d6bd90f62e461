// AVX-512 activation rows: backend/activations.h's Tanh and GeluTanh, eight lanes at a time
// (the double-precision steps in one 512-bit vector), each lane the scalar function's IEEE
// operations in its order and precision (no FMA: the build forbids contraction, and only
// separate multiplies and adds are written here). A side of Tanh's final choice that no lane
// takes is skipped: the lanes' results are the same either way.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/tanh_lanes_x86.h"

namespace lockstep::backend::detail {
namespace {

// The eight-lane double steps of tanh_lanes_x86.h.
struct Lanes8 {
  using D = __m512d;
  using I = __m256i;
  static D Set(double v) { return _mm512_set1_pd(v); }
  static D Add(D a, D b) { return _mm512_add_pd(a, b); }
  static D Sub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D Mul(D a, D b) { return _mm512_mul_pd(a, b); }
  static D Div(D a, D b) { return _mm512_div_pd(a, b); }
  static I Trunc(D a) { return _mm512_cvttpd_epi32(a); }
  static D Widen(I k) { return _mm512_cvtepi32_pd(k); }
  static D Pow2(I k) {
    return _mm512_cvtps_pd(
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)));
  }
};

// Tanh of eight floats (see Tanh in backend/activations.h for the method and constants).
__m256 Tanh8(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_mask, x);
  // ax < 10 ? ax : 10 (a NaN compares false and becomes 10, as in the scalar code).
  const __mmask8 lt10 = _mm256_cmp_ps_mask(ax, _mm256_set1_ps(10.0f), _CMP_LT_OQ);
  const __m512d a = _mm512_cvtps_pd(_mm256_mask_blend_ps(lt10, _mm256_set1_ps(10.0f), ax));
  const __mmask8 small = _mm512_cmp_pd_mask(a, _mm512_set1_pd(0.125), _CMP_LT_OQ);
  __m512d mag;
  if (small == 0)
    mag = TanhLarge<Lanes8>(a);
  else if (small == 0xFF)
    mag = TanhSmall<Lanes8>(a);
  else
    mag = _mm512_mask_blend_pd(small, TanhLarge<Lanes8>(a), TanhSmall<Lanes8>(a));
  // copysignf(float(mag), x)
  return _mm256_or_ps(_mm256_andnot_ps(sign_mask, _mm512_cvtpd_ps(mag)),
                      _mm256_and_ps(sign_mask, x));
}

}  // namespace

void GeluMulRowAvx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 k_sqrt_2_over_pi = _mm256_set1_ps(0.7978845608028654f),
               c = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    // 0.5f * x * (1.0f + Tanh(k * (x + 0.044715f * x * x * x))) * up, left to right.
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(c, x), x), x);
    const __m256 t = Tanh8(_mm256_mul_ps(k_sqrt_2_over_pi, _mm256_add_ps(x, cube)));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
}

void SoftcapRowAvx512(const float* x, float cap, float* out, int64_t n) {
  const __m256 c = _mm256_set1_ps(cap);
  for (int64_t i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(c, Tanh8(_mm256_div_ps(_mm256_loadu_ps(x + i), c))));
}

}  // namespace lockstep::backend::detail

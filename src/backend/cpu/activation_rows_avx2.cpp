// AVX2 activation rows: backend/activations.h's Tanh and GeluTanh, eight lanes at a time, each
// lane the scalar function's IEEE operations in its order and precision (no FMA: the build
// forbids contraction, and only separate multiplies and adds are written here).
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/tanh_lanes_x86.h"

namespace lockstep::backend::detail {
namespace {

// The eight-lane float steps of tanh_lanes_x86.h.
struct Lanes8 {
  using F = __m256;
  using I = __m256i;
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F And(F a, F b) { return _mm256_and_ps(a, b); }
  static F AndNot(F a, F b) { return _mm256_andnot_ps(a, b); }
  static F Or(F a, F b) { return _mm256_or_ps(a, b); }
  static I Trunc(F a) { return _mm256_cvttps_epi32(a); }
  static F ToFloat(I k) { return _mm256_cvtepi32_ps(k); }
  static F Pow2(I k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
  }
};

}  // namespace

void GeluMulRowAvx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 k_sqrt_2_over_pi = _mm256_set1_ps(0.7978845608028654f),
               c = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    // 0.5f * x * (1.0f + Tanh(k * (x + 0.044715f * x * x * x))) * up, left to right.
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(c, x), x), x);
    const __m256 t = TanhLanes<Lanes8>(_mm256_mul_ps(k_sqrt_2_over_pi, _mm256_add_ps(x, cube)));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
}

void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n) {
  const __m256 c = _mm256_set1_ps(cap);
  for (int64_t i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(c, TanhLanes<Lanes8>(_mm256_div_ps(_mm256_loadu_ps(x + i), c))));
}

}  // namespace lockstep::backend::detail

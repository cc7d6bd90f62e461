// AVX-512 activation rows: backend/activations.h's Tanh and GeluTanh, sixteen lanes at a time,
// each lane the scalar function's IEEE operations in its order and precision (no FMA: the build
// forbids contraction, and only separate multiplies and adds are written here).
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/tanh_lanes_x86.h"

namespace lockstep::backend::detail {
namespace {

// The sixteen-lane float steps of tanh_lanes_x86.h.
struct Lanes16 {
  using F = __m512;
  using I = __m512i;
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F And(F a, F b) { return _mm512_and_ps(a, b); }
  static F AndNot(F a, F b) { return _mm512_andnot_ps(a, b); }
  static F Or(F a, F b) { return _mm512_or_ps(a, b); }
  static I Trunc(F a) { return _mm512_cvttps_epi32(a); }
  static F ToFloat(I k) { return _mm512_cvtepi32_ps(k); }
  static F Pow2(I k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
  }
};

}  // namespace

void GeluMulRowAvx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 k_sqrt_2_over_pi = _mm512_set1_ps(0.7978845608028654f),
               c = _mm512_set1_ps(0.044715f);
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    // 0.5f * x * (1.0f + Tanh(k * (x + 0.044715f * x * x * x))) * up, left to right.
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(c, x), x), x);
    const __m512 t = TanhLanes<Lanes16>(_mm512_mul_ps(k_sqrt_2_over_pi, _mm512_add_ps(x, cube)));
    const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, t));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(gelu, _mm512_loadu_ps(up + i)));
  }
}

void SoftcapRowAvx512(const float* x, float cap, float* out, int64_t n) {
  const __m512 c = _mm512_set1_ps(cap);
  for (int64_t i = 0; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        out + i, _mm512_mul_ps(c, TanhLanes<Lanes16>(_mm512_div_ps(_mm512_loadu_ps(x + i), c))));
}

}  // namespace lockstep::backend::detail

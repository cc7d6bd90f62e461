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

// The sixteen-lane operations of tanh_lanes_x86.h.
struct Lanes16 {
  using F = __m512;
  using I = __m512i;
  static constexpr int64_t kLanes = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  // v where x >= bound (or x is NaN), 0 where x < bound.
  static F ZeroBelow(F x, F bound, F v) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, bound, _CMP_NLT_UQ), v);
  }
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
  GeluMulLanes<Lanes16>(gate, up, out, n);
}

void SoftcapRowAvx512(const float* x, float cap, float* out, int64_t n) {
  SoftcapLanes<Lanes16>(x, cap, out, n);
}

float MaxRowAvx512(const float* x, int64_t n, float mx) {
  return MaxLanes<Lanes16>(x, n, mx);
}

void SoftmaxWeightsAvx512(float* x, float mx, int64_t n) {
  SoftmaxWeightsLanes<Lanes16>(x, mx, n);
}

}  // namespace lockstep::backend::detail

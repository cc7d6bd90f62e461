// AVX2 activation rows: backend/activations.h's Tanh and GeluTanh, eight lanes at a time, each
// lane the scalar function's IEEE operations in its order and precision (no FMA: the build
// forbids contraction, and only separate multiplies and adds are written here).
#include <immintrin.h>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/tanh_lanes_x86.h"

namespace lockstep::backend::detail {
namespace {

// The eight-lane operations of tanh_lanes_x86.h.
struct Lanes8 {
  using F = __m256;
  using I = __m256i;
  static constexpr int64_t kLanes = 8;
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  // v where x >= bound (or x is NaN), 0 where x < bound.
  static F ZeroBelow(F x, F bound, F v) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, bound, _CMP_LT_OQ), v);
  }
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
  GeluMulLanes<Lanes8>(gate, up, out, n);
}

void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n) {
  SoftcapLanes<Lanes8>(x, cap, out, n);
}

float MaxRowAvx2(const float* x, int64_t n, float mx) {
  return MaxLanes<Lanes8>(x, n, mx);
}

void SoftmaxWeightsAvx2(float* x, float mx, int64_t n) {
  SoftmaxWeightsLanes<Lanes8>(x, mx, n);
}

void AddToLanes8Avx2(const float* x, int64_t n, float* lanes) {
  __m256 acc = _mm256_loadu_ps(lanes);
  for (int64_t i = 0; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
  _mm256_storeu_ps(lanes, acc);
}

}  // namespace lockstep::backend::detail

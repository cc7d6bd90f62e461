// The float steps of backend/activations.h's Tanh and SoftmaxWeight and the GELU, softcap and
// softmax row loops, written once for the AVX2 and AVX-512 activation rows: each takes an ops struct O of its vector width
// (O::F the float vector of O::kLanes lanes, O::I the int32 vector of the same lane count, and
// the few operations below), so both widths run the scalar functions' IEEE operations in their
// order. Include only from activation_rows_avx2.cpp / _avx512.cpp (header-local, as dot_x86.h).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backend/activations.h"

namespace lockstep::backend::detail {
namespace {

// Expm1Reduced of every lane of r.
template <class O>
typename O::F Expm1ReducedLanes(typename O::F r) {
  using namespace activation;
  typename O::F p = O::Set(kP8);
  for (float c : {kP7, kP6, kP5, kP4, kP3, kP2}) p = O::Add(O::Mul(p, r), O::Set(c));
  return O::Add(r, O::Mul(O::Mul(r, r), p));
}

// Tanh of every lane of x (see Tanh in backend/activations.h for the method).
template <class O>
typename O::F TanhLanes(typename O::F x) {
  using namespace activation;
  using F = typename O::F;
  const F sign = O::Set(-0.0f);
  // min(|x|, cap) takes its second operand for a NaN, as the scalar compare does.
  const F a = O::Min(O::AndNot(sign, x), O::Set(kTanhCap));
  const F y = O::Add(a, a);
  const typename O::I k = O::Trunc(O::Add(O::Mul(y, O::Set(kLog2E)), O::Set(0.5f)));
  const F kf = O::ToFloat(k);
  const F r = O::Sub(O::Sub(y, O::Mul(kf, O::Set(kLn2Hi))), O::Mul(kf, O::Set(kLn2Lo)));
  const F m = Expm1ReducedLanes<O>(r);
  const F scale = O::Pow2(k);
  const F q = O::Add(O::Mul(scale, m), O::Sub(scale, O::Set(1.0f)));
  const F t = O::Div(q, O::Add(q, O::Set(2.0f)));
  return O::Or(t, O::And(sign, x));  // t >= 0, so this is copysignf(t, x)
}

// out[i] = GeluTanh(gate[i]) * up[i] over the first n / kLanes * kLanes elements.
template <class O>
void GeluMulLanes(const float* gate, const float* up, float* out, int64_t n) {
  using F = typename O::F;
  const F k_sqrt_2_over_pi = O::Set(activation::kGeluScale), c = O::Set(activation::kGeluCubic);
  const F half = O::Set(0.5f), one = O::Set(1.0f);
  for (int64_t i = 0; i + O::kLanes <= n; i += O::kLanes) {
    const F x = O::Load(gate + i);
    // 0.5f * x * (1.0f + Tanh(k * (x + 0.044715f * x * x * x))) * up, left to right.
    const F cube = O::Mul(O::Mul(O::Mul(c, x), x), x);
    const F t = TanhLanes<O>(O::Mul(k_sqrt_2_over_pi, O::Add(x, cube)));
    const F gelu = O::Mul(O::Mul(half, x), O::Add(one, t));
    O::Store(out + i, O::Mul(gelu, O::Load(up + i)));
  }
}

// SoftmaxWeight of every lane of x (see backend/activations.h).
template <class O>
typename O::F SoftmaxWeightLanes(typename O::F x) {
  using namespace activation;
  using F = typename O::F;
  const F low = O::Set(kMinLogWeight);
  const F a = O::Max(x, low);  // a NaN takes `low`, as the scalar compare does
  const typename O::I k = O::Trunc(O::Sub(O::Mul(a, O::Set(kLog2E)), O::Set(0.5f)));
  const F kf = O::ToFloat(k);
  const F r = O::Sub(O::Sub(a, O::Mul(kf, O::Set(kLn2Hi))), O::Mul(kf, O::Set(kLn2Lo)));
  const F e = O::Add(O::Set(1.0f), Expm1ReducedLanes<O>(r));
  return O::ZeroBelow(x, low, O::Mul(O::Pow2(k), e));
}

// The largest of x[0, n / kLanes * kLanes) and `mx`, NaNs skipped (as std::max(mx, x[i]) does):
// a maximum is exact, so any order gives the scalar loop's value.
template <class O>
float MaxLanes(const float* x, int64_t n, float mx) {
  typename O::F m = O::Set(mx);
  for (int64_t i = 0; i + O::kLanes <= n; i += O::kLanes) m = O::Max(O::Load(x + i), m);
  float lanes[O::kLanes];
  O::Store(lanes, m);
  for (float v : lanes) mx = v > mx ? v : mx;
  return mx;
}

// x[i] = SoftmaxWeight(x[i] - mx) over the first n / kLanes * kLanes elements.
template <class O>
void SoftmaxWeightsLanes(float* x, float mx, int64_t n) {
  const typename O::F m = O::Set(mx);
  for (int64_t i = 0; i + O::kLanes <= n; i += O::kLanes)
    O::Store(x + i, SoftmaxWeightLanes<O>(O::Sub(O::Load(x + i), m)));
}

// out[i] = cap * Tanh(x[i] / cap) over the first n / kLanes * kLanes elements.
template <class O>
void SoftcapLanes(const float* x, float cap, float* out, int64_t n) {
  const typename O::F c = O::Set(cap);
  for (int64_t i = 0; i + O::kLanes <= n; i += O::kLanes)
    O::Store(out + i, O::Mul(c, TanhLanes<O>(O::Div(O::Load(x + i), c))));
}

}  // namespace
}  // namespace lockstep::backend::detail

// The float steps of backend/activations.h's Tanh, written once for the AVX2 and AVX-512
// activation rows: each takes an ops struct O of its vector width (O::F the float vector, O::I
// the int32 vector of the same lane count, and the few operations below), so both widths run
// the scalar function's IEEE operations in its order. Include only from
// activation_rows_avx2.cpp / _avx512.cpp (header-local, as dot_x86.h).
#pragma once

namespace lockstep::backend::detail {
namespace {

// Tanh of every lane of x (see Tanh in backend/activations.h for the method and constants).
template <class O>
typename O::F TanhLanes(typename O::F x) {
  using F = typename O::F;
  const F sign = O::Set(-0.0f);
  // min(|x|, 10) takes its second operand for a NaN, as the scalar compare does.
  const F a = O::Min(O::AndNot(sign, x), O::Set(10.0f));
  const F y = O::Add(a, a);
  const typename O::I k = O::Trunc(O::Add(O::Mul(y, O::Set(1.44269504f)), O::Set(0.5f)));
  const F kf = O::ToFloat(k);
  const F r =
      O::Sub(O::Sub(y, O::Mul(kf, O::Set(0.693145751953125f))), O::Mul(kf, O::Set(1.42860677e-6f)));
  const float kPoly[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f,
                         1.0f / 24.0f,   1.0f / 6.0f,   0.5f};
  F p = O::Set(1.0f / 40320.0f);
  for (float c : kPoly) p = O::Add(O::Mul(p, r), O::Set(c));
  const F m = O::Add(r, O::Mul(O::Mul(r, r), p));
  const F scale = O::Pow2(k);
  const F q = O::Add(O::Mul(scale, m), O::Sub(scale, O::Set(1.0f)));
  const F t = O::Div(q, O::Add(q, O::Set(2.0f)));
  return O::Or(t, O::And(sign, x));  // t >= 0, so this is copysignf(t, x)
}

}  // namespace
}  // namespace lockstep::backend::detail

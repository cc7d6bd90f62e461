// The double-precision steps of backend/activations.h's Tanh, written once for the AVX2 and
// AVX-512 activation rows: each takes an ops struct O of its vector width (O::D the double
// vector, O::I the int32 vector of the same lane count, and the few operations below), so both
// widths run the scalar function's IEEE operations in its order. Include only from
// activation_rows_avx2.cpp / _avx512.cpp (header-local, as dot_x86.h).
#pragma once

namespace lockstep::backend::detail {
namespace {

// 1 - 2 / (e^y + 1) for y = 2a (a <= 10): the scalar code's reduction, polynomial and 2^k.
template <class O>
typename O::D TanhLarge(typename O::D a) {
  using D = typename O::D;
  const D y = O::Add(a, a);
  // static_cast<int>(y * log2(e) + 0.5): truncation toward zero.
  const typename O::I k = O::Trunc(O::Add(O::Mul(y, O::Set(1.4426950408889634)), O::Set(0.5)));
  const D kd = O::Widen(k);
  const D r = O::Sub(O::Sub(y, O::Mul(kd, O::Set(6.93147180369123816490e-01))),
                     O::Mul(kd, O::Set(1.90821492927058770002e-10)));
  const double kPoly[] = {
      1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
      1.0 / 24.0,      1.0 / 6.0,      0.5,           1.0,          1.0};
  D p = O::Set(1.0 / 39916800.0);
  for (double c : kPoly) p = O::Add(O::Mul(p, r), O::Set(c));
  const D scale = O::Pow2(k);  // 2^k as a float (exact), widened
  const D one = O::Set(1.0);
  return O::Sub(one, O::Div(O::Set(2.0), O::Add(O::Mul(p, scale), one)));
}

// a + a^3 s(a^2), the odd series for a < 0.125.
template <class O>
typename O::D TanhSmall(typename O::D a) {
  using D = typename O::D;
  const D a2 = O::Mul(a, a);
  const double kOdd[] = {-1382.0 / 155925.0, 62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0};
  D s = O::Set(21844.0 / 6081075.0);
  for (double c : kOdd) s = O::Add(O::Mul(s, a2), O::Set(c));
  return O::Add(a, O::Mul(a, O::Mul(a2, s)));
}

}  // namespace
}  // namespace lockstep::backend::detail

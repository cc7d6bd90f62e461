// Element-wise activation functions shared by the CPU and CUDA backends, inline and
// branch-free so their loops vectorize. Plain IEEE multiplies, adds and one divide in a fixed
// order (no libm, no FMA; both builds forbid contraction): the same bits on every CPU, GPU,
// thread split and batch.
#pragma once

#include <math.h>

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define LS_HOST_DEVICE __host__ __device__
#else
#define LS_HOST_DEVICE
#endif

namespace lockstep::backend {

// tanh(x), evaluated in double and rounded once to float: within 0.5 ulp + 1e-12 of the true
// value (tested against double tanh), so it agrees with a good libm tanhf to the last bit in
// almost every case while its loop vectorizes.
// |x| < 0.125: odd Taylor polynomial to x^11; otherwise 1 - 2 / (exp(2|x|) + 1) with
// exp(y) = 2^k * p(r), r = y - k ln2 (Cody-Waite split of ln2), p the degree-11 Taylor
// polynomial (|r| <= 0.35: truncation below 1e-14).
LS_HOST_DEVICE inline float Tanh(float x) {
  // tanh(10) rounds to 1; the compare also maps NaN to 10, so no cast below sees a NaN.
  const float ax = fabsf(x);
  const double a = ax < 10.0f ? ax : 10.0f;
  const double y = a + a;
  const int k = static_cast<int>(y * 1.4426950408889634 + 0.5);
  const double kd = static_cast<double>(k);
  const double r = (y - kd * 6.93147180369123816490e-01) - kd * 1.90821492927058770002e-10;
  double p = 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k (k <= 29) is exact as a float, and exactly widened.
  const double scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  const double big = 1.0 - 2.0 / (p * scale + 1.0);
  const double a2 = a * a;
  double s = 21844.0 / 6081075.0;
  s = s * a2 - 1382.0 / 155925.0;
  s = s * a2 + 62.0 / 2835.0;
  s = s * a2 - 17.0 / 315.0;
  s = s * a2 + 2.0 / 15.0;
  s = s * a2 - 1.0 / 3.0;
  const double small = a + a * (a2 * s);
  return copysignf(static_cast<float>(a < 0.125 ? small : big), x);
}

// GELU, tanh approximation (gelu_pytorch_tanh), as Gemma 4 uses.
LS_HOST_DEVICE inline float GeluTanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + Tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace lockstep::backend

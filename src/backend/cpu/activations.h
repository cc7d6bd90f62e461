// Element-wise activation functions of the CPU backend, inline and branch-free so their loops
// vectorize. Plain IEEE multiplies, adds and one divide in a fixed order (no libm, no FMA):
// the same bits on every CPU, thread split and batch, and reproducible by a device backend.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace lockstep::backend {

// tanh(x) with an absolute error below 1.2e-7 (measured against double tanh over [-12, 12]).
// |x| < 0.125: odd Taylor polynomial to x^9; otherwise 1 - 2 / (exp(2|x|) + 1) with
// exp(y) = 2^k * p(r), r = y - k ln2 (Cody-Waite split), p the degree-7 Taylor polynomial.
inline float Tanh(float x) {
  // tanh(10) rounds to 1; the compare also maps NaN to 10, so no cast below sees a NaN.
  const float ax = std::fabs(x);
  const float a = ax < 10.0f ? ax : 10.0f;
  const float y = a + a;
  const int k = static_cast<int>(y * 1.44269504f + 0.5f);
  const float kf = static_cast<float>(k);
  const float r = (y - kf * 0.693359375f) - kf * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  const float big = 1.0f - 2.0f / (p * scale + 1.0f);
  const float a2 = a * a;
  float s = 62.0f / 2835.0f;
  s = s * a2 - 17.0f / 315.0f;
  s = s * a2 + 2.0f / 15.0f;
  s = s * a2 - 1.0f / 3.0f;
  const float small = a + a * (a2 * s);
  return std::copysign(a < 0.125f ? small : big, x);
}

// GELU, tanh approximation (gelu_pytorch_tanh), as Gemma 4 uses.
inline float GeluTanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + Tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace lockstep::backend

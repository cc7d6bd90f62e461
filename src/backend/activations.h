// Element-wise activation functions shared by the CPU and CUDA backends, inline and
// branch-free so their loops vectorize. Plain IEEE float multiplies, adds and one divide in a
// fixed order (no libm, no FMA; both builds forbid contraction): the same bits on every CPU,
// GPU, thread split and batch.
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

// Tanh's and GeluTanh's constants, which the vector rows (backend/cpu/tanh_lanes_x86.h) use too.
namespace activation {
inline constexpr float kTanhCap = 10.0f;  // |x| from which tanh(x) rounds to 1
inline constexpr float kLog2E = 1.44269504f;
inline constexpr float kLn2Hi = 0.693145751953125f;  // 9 low zero bits: k kLn2Hi exact, k <= 29
inline constexpr float kLn2Lo = 1.42860677e-6f;      // ln2 - kLn2Hi
// p(r) = kP2 + r (kP3 + r (... + r kP8)), kPn = 1 / n!
inline constexpr float kP8 = 1.0f / 40320.0f, kP7 = 1.0f / 5040.0f, kP6 = 1.0f / 720.0f,
                       kP5 = 1.0f / 120.0f, kP4 = 1.0f / 24.0f, kP3 = 1.0f / 6.0f, kP2 = 0.5f;
inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;
// Softmax weights below e^-80 (relative to the largest, which is exactly 1) are taken as 0.
// Their products with value elements would often be subnormal floats, which cost x86 cores a
// microcode assist each (a tenth of a 512-token prefill on random weights); dropped, they change
// neither the sum (a sum that the largest weight's 1 enters absorbs anything below 2^-25) nor an
// output element, unless its kept terms cancel to below about 2^-75 of the value rows' scale.
inline constexpr float kMinLogWeight = -80.0f;
}  // namespace activation

// expm1(r) = r + r^2 p(r) for a reduced argument |r| <= ln2 / 2, p the Taylor polynomial to
// r^6 / 8! (truncation below 6e-9 relative): the core of Tanh and SoftmaxWeight.
LS_HOST_DEVICE inline float Expm1Reduced(float r) {
  using namespace activation;
  float p = kP8;
  p = p * r + kP7;
  p = p * r + kP6;
  p = p * r + kP5;
  p = p * r + kP4;
  p = p * r + kP3;
  p = p * r + kP2;
  return r + (r * r) * p;
}

// tanh(x) in float: tanh(a) = q / (q + 2) with q = expm1(2a), a = |x| (capped at 10, where
// tanh rounds to 1), the sign put back. expm1(y) = 2^k expm1(r) + (2^k - 1) with
// k = trunc(y log2(e) + 1/2), r = y - k ln2 (Cody-Waite: ln2 in two floats, k ln2_hi exact) and
// expm1(r) from Expm1Reduced. No term cancels, so the result is within 3 ulp everywhere, tiny inputs
// included (tested against double tanh), in float arithmetic: the AVX2 and AVX-512 rows take
// 8 and 16 lanes a step (double precision took a quarter as many and dominated a decode step's
// element-wise work).
LS_HOST_DEVICE inline float Tanh(float x) {
  using namespace activation;
  // The compare also maps NaN to kTanhCap, so no conversion below sees a NaN (as _mm*_min_ps
  // does).
  const float ax = fabsf(x);
  const float a = ax < kTanhCap ? ax : kTanhCap;
  const float y = a + a;
  const int k = static_cast<int>(y * kLog2E + 0.5f);  // 0..29
  const float kf = static_cast<float>(k);
  const float r = (y - kf * kLn2Hi) - kf * kLn2Lo;
  const float m = Expm1Reduced(r);
  // 2^k (k <= 29) as a float, exact; q >= 0 since 2^k |m| < 2^k - 1 for k >= 1.
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  const float q = scale * m + (scale - 1.0f);
  return copysignf(q / (q + 2.0f), x);
}

// A softmax weight e^x for x = score - (the row's largest score) <= 0, or 0 below
// kMinLogWeight: e^x = 2^k e^r with k = trunc(x log2(e) - 1/2) (|x log2(e) - k| <= 1/2, so
// |r| <= ln2 / 2 after the same Cody-Waite step as Tanh's; k >= -116, so 2^k is a normal float)
// and e^r = 1 + (r + r^2 p(r)), Tanh's polynomial: within 2 ulp of e^x (tested against double
// exp). A NaN takes the clamp's value, as _mm*_max_ps(x, c) gives c, so every level agrees.
LS_HOST_DEVICE inline float SoftmaxWeight(float x) {
  using namespace activation;
  const float a = x > kMinLogWeight ? x : kMinLogWeight;
  const int k = static_cast<int>(a * kLog2E - 0.5f);  // -116..0
  const float kf = static_cast<float>(k);
  const float r = (a - kf * kLn2Hi) - kf * kLn2Lo;
  const float e = 1.0f + Expm1Reduced(r);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  return x < kMinLogWeight ? 0.0f : scale * e;
}

// GELU, tanh approximation (gelu_pytorch_tanh), as Gemma 4 uses.
LS_HOST_DEVICE inline float GeluTanh(float x) {
  using namespace activation;
  return 0.5f * x * (1.0f + Tanh(kGeluScale * (x + kGeluCubic * x * x * x)));
}

}  // namespace lockstep::backend

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
}  // namespace activation

// tanh(x) in float: tanh(a) = q / (q + 2) with q = expm1(2a), a = |x| (capped at 10, where
// tanh rounds to 1), the sign put back. expm1(y) = 2^k expm1(r) + (2^k - 1) with
// k = trunc(y log2(e) + 1/2), r = y - k ln2 (Cody-Waite: ln2 in two floats, k ln2_hi exact) and
// expm1(r) = r + r^2 p(r), p the Taylor polynomial to r^6 / 8! (|r| <= 0.347: truncation below
// 6e-9 relative). No term cancels, so the result is within 3 ulp everywhere, tiny inputs
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
  float p = kP8;
  p = p * r + kP7;
  p = p * r + kP6;
  p = p * r + kP5;
  p = p * r + kP4;
  p = p * r + kP3;
  p = p * r + kP2;
  const float m = r + (r * r) * p;
  // 2^k (k <= 29) as a float, exact; q >= 0 since 2^k |m| < 2^k - 1 for k >= 1.
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  const float q = scale * m + (scale - 1.0f);
  return copysignf(q / (q + 2.0f), x);
}

// GELU, tanh approximation (gelu_pytorch_tanh), as Gemma 4 uses.
LS_HOST_DEVICE inline float GeluTanh(float x) {
  using namespace activation;
  return 0.5f * x * (1.0f + Tanh(kGeluScale * (x + kGeluCubic * x * x * x)));
}

}  // namespace lockstep::backend

// Device side of NEOX RoPE, shared by the RoPE kernel and the fused per-head norm + RoPE: the
// angle of pair i at a position (in double, as the CPU backend computes it) and the rotation.
#pragma once

#include <cstdint>

namespace lockstep::backend::cuda {

// cos and sin of pos * base^(-2i/n_rot) / ff[i] (ff: device floats, or null).
__device__ __forceinline__ void RopeCosSin(int32_t pos, int i, int n_rot, float base,
                                           const float* ff, float* c, float* s) {
  const double inv_freq = pow(static_cast<double>(base), -2.0 * i / n_rot) / (ff ? ff[i] : 1.0f);
  const double theta = static_cast<double>(pos) * inv_freq;
  *c = static_cast<float>(cos(theta));
  *s = static_cast<float>(sin(theta));
}

// The pair (a, b) = (v[i], v[i + n_rot/2]) rotated by the angle whose cos and sin are c, s.
__device__ __forceinline__ void RopeRotate(float* a, float* b, float c, float s) {
  const float x = *a, y = *b;
  *a = x * c - y * s;
  *b = x * s + y * c;
}

}  // namespace lockstep::backend::cuda

// Seeded random rows and float bit patterns shared by the kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace lockstep::testing {

// n draws of N(0, scale^2) from mt19937(seed): the same row for the same arguments.
inline std::vector<float> GaussianRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

// The bits of a float, for bit-for-bit comparisons.
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// How many positions of a and b (same length) hold floats with different bits.
inline int CountDifferingBits(const std::vector<float>& a, const std::vector<float>& b) {
  int d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += FloatBits(a[i]) != FloatBits(b[i]);
  return d;
}

}  // namespace lockstep::testing

// Attention scores of several queries against four keys they all read, in DotF32's order (8
// lanes, lane k adds elements i = k mod 8 with a separate multiply and add, then the fixed
// tree), for the AVX2 and AVX-512 translation units: each key is loaded once for all queries.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/dot_internal.h"

namespace lockstep::quant::detail {
// Header-local (internal linkage): each translation unit compiles its own copy for its level.
namespace {

// out[q][c] = DotF32(keys[c], queries[q], n) for c < 4, q < kQ, bit for bit.
template <int kQ>
void F32KeysBlock(const float* const* keys, const float* const* queries, int64_t n,
                  float* const* out) {
  constexpr int kKeys = 4;
  __m256 acc[kQ][kKeys];
  for (auto& row : acc)
    for (auto& v : row) v = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 key[kKeys];
    for (int c = 0; c < kKeys; ++c) key[c] = _mm256_loadu_ps(keys[c] + i);
    for (int q = 0; q < kQ; ++q) {
      const __m256 x = _mm256_loadu_ps(queries[q] + i);
      for (int c = 0; c < kKeys; ++c)
        acc[q][c] = _mm256_add_ps(acc[q][c], _mm256_mul_ps(key[c], x));
    }
  }
  for (int q = 0; q < kQ; ++q) {
    for (int c = 0; c < kKeys; ++c) {
      Acc8 lanes;  // the tail goes to lanes 0.., then DotF32's tree
      _mm256_storeu_ps(lanes.a, acc[q][c]);
      for (int64_t j = i; j < n; ++j) lanes.Add(j - i, keys[c][j] * queries[q][j]);
      out[q][c] = lanes.Sum();
    }
  }
}

}  // namespace
}  // namespace lockstep::quant::detail

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

// Acc8::Sum of each of four 8-lane vectors, lane c holding v[c]'s: the halves' lanes added
// give (a0 + a4, a1 + a5, a2 + a6, a3 + a7), and two horizontal adds of pairs give the tree's
// s0 = (a0 + a4) + (a1 + a5), s1 = (a2 + a6) + (a3 + a7), then s0 + s1: the same additions.
// (A store and scalar tree per key cost as much as the dot products of a 64-wide head.)
inline __m128 Acc8Tree4(const __m256* v) {
  __m128 t[4];
  for (int c = 0; c < 4; ++c)
    t[c] = _mm_add_ps(_mm256_castps256_ps128(v[c]), _mm256_extractf128_ps(v[c], 1));
  return _mm_hadd_ps(_mm_hadd_ps(t[0], t[1]), _mm_hadd_ps(t[2], t[3]));
}

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
  if (i == n) {  // no tail: Acc8's tree for the four keys at once
    for (int q = 0; q < kQ; ++q) _mm_storeu_ps(out[q], Acc8Tree4(acc[q]));
    return;
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

// Attention's float kernels on AVX-512: scores of up to four queries against four keys (two
// keys' 8-lane sums a register), and the weighted sum of value rows into up to four
// accumulators at once, every value row loaded once for all of them, in row order.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quant/dot_f32_block_x86.h"
#include "quant/dot_internal.h"
#include "quant/weighted_rows_x86.h"

namespace lockstep::quant::detail {
namespace {

// out[q][c] = DotF32(keys[c], queries[q], n) for c < 4, q < kQ, bit for bit: keys 2p and 2p + 1
// share a register (lanes 0-7 and 8-15) against the query's 8 elements in both halves, so each
// lane still adds the elements i = lane mod 8 of its own key in order, with half the multiplies
// and adds of the 8-lane kernel (F32KeysBlock), whose tail and tree it then shares.
template <int kQ>
void F32KeysBlockWide(const float* const* keys, const float* const* queries, int64_t n,
                      float* const* out) {
  __m512 acc[kQ][2];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512 key[2];
    for (int p = 0; p < 2; ++p)
      key[p] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(keys[2 * p] + i)),
                                  _mm256_loadu_ps(keys[2 * p + 1] + i), 1);
    for (int q = 0; q < kQ; ++q) {
      const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(queries[q] + i));
      for (int p = 0; p < 2; ++p) acc[q][p] = _mm512_add_ps(acc[q][p], _mm512_mul_ps(key[p], x));
    }
  }
  for (int q = 0; q < kQ; ++q) {
    __m256 sums[4];
    for (int p = 0; p < 2; ++p) {
      sums[2 * p] = _mm512_castps512_ps256(acc[q][p]);
      sums[2 * p + 1] = _mm512_extractf32x8_ps(acc[q][p], 1);
    }
    if (i == n) {
      _mm_storeu_ps(out[q], Acc8Tree4(sums));
      continue;
    }
    for (int c = 0; c < 4; ++c) {
      Acc8 lanes;  // the tail goes to lanes 0.., then DotF32's tree
      _mm256_storeu_ps(lanes.a, sums[c]);
      for (int64_t j = i; j < n; ++j) lanes.Add(j - i, keys[c][j] * queries[q][j]);
      out[q][c] = lanes.Sum();
    }
  }
}

// Sixteen float lanes; 64 elements (four registers) an accumulator a chunk (16 of the 32 zmm
// registers for four accumulators); the last n % 16 elements with the lanes past n masked off
// (their loads do not touch memory).
struct Lanes16f {
  using V = __m512;
  static constexpr int kLanes = 16, kWideRegs = 4;
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V Set1(float x) { return _mm512_set1_ps(x); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  template <int kQ>
  static void Tail(const float* const* rows, int n_rows, const float* const* w, int64_t i,
                   int n_left, float* const* acc) {
    const auto mask = static_cast<__mmask16>((1u << n_left) - 1);
    V a[kQ];
    for (int q = 0; q < kQ; ++q) a[q] = _mm512_maskz_loadu_ps(mask, acc[q] + i);
    for (int t = 0; t < n_rows; ++t) {
      const V v = _mm512_maskz_loadu_ps(mask, rows[t] + i);
      for (int q = 0; q < kQ; ++q) a[q] = Add(a[q], Mul(Set1(w[q][t]), v));
    }
    for (int q = 0; q < kQ; ++q) _mm512_mask_storeu_ps(acc[q] + i, mask, a[q]);
  }
};

}  // namespace

void DotF32BlockAvx512(const float* const* keys, const float* const* queries, int n_queries,
                       int64_t n, float* const* out) {
  switch (n_queries) {
    case 1:
      return F32KeysBlockWide<1>(keys, queries, n, out);
    case 2:
      return F32KeysBlockWide<2>(keys, queries, n, out);
    case 3:
      return F32KeysBlockWide<3>(keys, queries, n, out);
    default:
      return F32KeysBlockWide<4>(keys, queries, n, out);
  }
}

void AddWeightedRowsAvx512(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                           int64_t n, float* const* acc) {
  AddWeightedRowsWith<Lanes16f>(rows, n_rows, w, n_acc, n, acc);
}

}  // namespace lockstep::quant::detail

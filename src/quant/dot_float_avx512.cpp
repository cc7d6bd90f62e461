// Attention's float kernels on AVX-512: scores of up to four queries against four keys (ymm
// registers 16-31 hold the extra sums), and the weighted sum of value rows with up to 256
// accumulator elements in registers while every value row streams through once, in row order.
#include <immintrin.h>

#include "quant/dot_f32_block_x86.h"
#include "quant/dot_internal.h"

namespace lockstep::quant::detail {
namespace {

// acc[i, i + 16 kRegs) over all rows. Element i still gets ((acc + w0 r0) + w1 r1) + ... with
// each product rounded (-ffp-contract=off keeps the multiply and the add apart): the same bits
// as the scalar loop, whatever the chunk width. Sixteen independent sums hide the add latency
// that bounds the four-register AVX2 loop.
template <int kRegs>
void AddRowsChunk(const float* const* rows, const float* w, int n_rows, int64_t i, float* acc) {
  __m512 a[kRegs];
  for (int j = 0; j < kRegs; ++j) a[j] = _mm512_loadu_ps(acc + i + 16 * j);
  for (int t = 0; t < n_rows; ++t) {
    const __m512 wt = _mm512_set1_ps(w[t]);
    const float* row = rows[t] + i;
    for (int j = 0; j < kRegs; ++j)
      a[j] = _mm512_add_ps(a[j], _mm512_mul_ps(wt, _mm512_loadu_ps(row + 16 * j)));
  }
  for (int j = 0; j < kRegs; ++j) _mm512_storeu_ps(acc + i + 16 * j, a[j]);
}

// The last n % 16 elements, lanes past n masked off (their loads do not touch memory).
void AddRowsMasked(const float* const* rows, const float* w, int n_rows, int64_t i, int n_left,
                   float* acc) {
  const auto mask = static_cast<__mmask16>((1u << n_left) - 1);
  __m512 a = _mm512_maskz_loadu_ps(mask, acc + i);
  for (int t = 0; t < n_rows; ++t)
    a = _mm512_add_ps(
        a, _mm512_mul_ps(_mm512_set1_ps(w[t]), _mm512_maskz_loadu_ps(mask, rows[t] + i)));
  _mm512_mask_storeu_ps(acc + i, mask, a);
}

}  // namespace

void DotF32BlockAvx512(const float* const* keys, const float* const* queries, int n_queries,
                       int64_t n, float* const* out) {
  // Up to four queries a pass: 16 sums in flight in 32 ymm registers.
  switch (n_queries) {
    case 1:
      return F32KeysBlock<1>(keys, queries, n, out);
    case 2:
      return F32KeysBlock<2>(keys, queries, n, out);
    case 3:
      return F32KeysBlock<3>(keys, queries, n, out);
    default:
      return F32KeysBlock<4>(keys, queries, n, out);
  }
}

void AddWeightedRowsAvx512(const float* const* rows, const float* w, int n_rows, int64_t n,
                           float* acc) {
  int64_t i = 0;
  for (; i + 256 <= n; i += 256) AddRowsChunk<16>(rows, w, n_rows, i, acc);
  if (i + 128 <= n) AddRowsChunk<8>(rows, w, n_rows, i, acc), i += 128;
  if (i + 64 <= n) AddRowsChunk<4>(rows, w, n_rows, i, acc), i += 64;
  if (i + 32 <= n) AddRowsChunk<2>(rows, w, n_rows, i, acc), i += 32;
  if (i + 16 <= n) AddRowsChunk<1>(rows, w, n_rows, i, acc), i += 16;
  if (i < n) AddRowsMasked(rows, w, n_rows, i, static_cast<int>(n - i), acc);
}

}  // namespace lockstep::quant::detail

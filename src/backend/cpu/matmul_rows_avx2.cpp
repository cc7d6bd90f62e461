// AVX2/F16C multi-row float dots (see matmul_rows.h for the ordering contract).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/matmul_rows.h"
#include "quant/dot_x86.h"

namespace lockstep::backend {
namespace {

using quant::detail::Half;
using quant::detail::LoadW;

// One weight as a float. Built from dot_x86.h's header-local helpers: an AVX2-compiled copy
// of a shared inline function (core/half.h) could otherwise be picked by the linker for
// portable callers.
template <bool kHalf>
inline float ScalarW(const uint8_t* w, int64_t i) {
  if constexpr (kHalf) {
    return Half(w + 2 * i);
  } else {
    float f;
    std::memcpy(&f, w + 4 * i, 4);
    return f;
  }
}

template <bool kHalf, int kRows>
void Rows(const uint8_t* w, const float* const* x, int64_t n, float* out) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  // The caller walks weight rows in order: prefetch the next one, one line per 64 bytes.
  constexpr int kBytes = kHalf ? 2 : 4;
  const int64_t next_row = n * kBytes;
  for (; i + 8 <= n; i += 8) {
    if ((i * kBytes) % 64 == 0)
      _mm_prefetch(reinterpret_cast<const char*>(w + kBytes * i + next_row), _MM_HINT_T0);
    const __m256 wv = LoadW < kHalf ? 2 : 4 > (w, i);
    for (int r = 0; r < kRows; ++r)
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(wv, _mm256_loadu_ps(x[r] + i)));
  }
  for (int r = 0; r < kRows; ++r) {
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[r]);
    int64_t j = i;
    for (int k = 0; j < n; ++j, ++k) lanes[k] += ScalarW<kHalf>(w, j) * x[r][j];
    const float s0 = (lanes[0] + lanes[4]) + (lanes[1] + lanes[5]);
    const float s1 = (lanes[2] + lanes[6]) + (lanes[3] + lanes[7]);
    out[r] = s0 + s1;
  }
}

template <bool kHalf>
void Dispatch(const uint8_t* w, const float* const* x, int n_rows, int64_t n, float* out) {
  switch (n_rows) {
    case 1:
      return Rows<kHalf, 1>(w, x, n, out);
    case 2:
      return Rows<kHalf, 2>(w, x, n, out);
    case 3:
      return Rows<kHalf, 3>(w, x, n, out);
    default:
      return Rows<kHalf, 4>(w, x, n, out);
  }
}

}  // namespace

void DotRows4Avx2(DType t, const void* w_row, const float* const* x, int n_rows, int64_t n,
                  float* out) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  if (t == DType::F16)
    Dispatch<true>(w, x, n_rows, n, out);
  else
    Dispatch<false>(w, x, n_rows, n, out);
}

}  // namespace lockstep::backend

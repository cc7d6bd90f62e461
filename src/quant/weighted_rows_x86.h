// Attention's weighted sum of value rows into up to four accumulators (AddWeightedRows), written
// once for the AVX2 and AVX-512 translation units: each passes a lanes struct L of its vector
// width (L::V the float vector, kLanes, Load/Store/Set1/Add/Mul, kWideRegs: registers an
// accumulator keeps for the main chunk, and Tail for the last n % kLanes elements).
// Header-local (internal linkage), as dot_x86.h.
#pragma once

#include <cstdint>

namespace lockstep::quant::detail {
namespace {

// acc[q][i, i + kLanes kRegs) over all rows for q < kQ, every value row loaded once for all
// accumulators. Element i of each still gets ((acc + w0 r0) + w1 r1) + ... with each product
// rounded (-ffp-contract=off keeps the multiply and the add apart): the scalar loop's bits,
// whatever the chunk width or accumulator count. One accumulator alone is bound by loading the
// value rows (7.6 ns a key of 256 elements on a Zen 5 core); four share each load (3.3 ns).
template <class L, int kRegs, int kQ>
void AddRowsChunk(const float* const* rows, int n_rows, const float* const* w, int64_t i,
                  float* const* acc) {
  using V = typename L::V;
  V a[kQ][kRegs];
  for (int q = 0; q < kQ; ++q)
    for (int j = 0; j < kRegs; ++j) a[q][j] = L::Load(acc[q] + i + L::kLanes * j);
  for (int t = 0; t < n_rows; ++t) {
    V v[kRegs];
    for (int j = 0; j < kRegs; ++j) v[j] = L::Load(rows[t] + i + L::kLanes * j);
    for (int q = 0; q < kQ; ++q) {
      const V wt = L::Set1(w[q][t]);
      for (int j = 0; j < kRegs; ++j) a[q][j] = L::Add(a[q][j], L::Mul(wt, v[j]));
    }
  }
  for (int q = 0; q < kQ; ++q)
    for (int j = 0; j < kRegs; ++j) L::Store(acc[q] + i + L::kLanes * j, a[q][j]);
}

template <class L, int kQ>
void AddRows(const float* const* rows, int n_rows, const float* const* w, int64_t n,
             float* const* acc) {
  constexpr int kWide = L::kLanes * L::kWideRegs;
  int64_t i = 0;
  for (; i + kWide <= n; i += kWide) AddRowsChunk<L, L::kWideRegs, kQ>(rows, n_rows, w, i, acc);
  for (; i + L::kLanes <= n; i += L::kLanes) AddRowsChunk<L, 1, kQ>(rows, n_rows, w, i, acc);
  if (i < n) L::template Tail<kQ>(rows, n_rows, w, i, static_cast<int>(n - i), acc);
}

template <class L>
void AddWeightedRowsWith(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                         int64_t n, float* const* acc) {
  switch (n_acc) {
    case 1:
      return AddRows<L, 1>(rows, n_rows, w, n, acc);
    case 2:
      return AddRows<L, 2>(rows, n_rows, w, n, acc);
    case 3:
      return AddRows<L, 3>(rows, n_rows, w, n, acc);
    default:
      return AddRows<L, 4>(rows, n_rows, w, n, acc);
  }
}

}  // namespace
}  // namespace lockstep::quant::detail

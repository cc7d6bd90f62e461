// Element-wise activation rows for the CPU backend: GELU (tanh form) times a second row, the
// logit softcap and attention's softmax numerators, over whole rows. The portable loops call backend/activations.h; the AVX2 and
// AVX-512 versions (activation_rows_avx2.cpp, _avx512.cpp) evaluate the same IEEE operations,
// in the same order and precision, eight or sixteen lanes at a time, so every level gives the same
// bits.
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace lockstep::backend {

// out[i] = GeluTanh(gate[i]) * up[i].
void GeluMulRow(const float* gate, const float* up, float* out, int64_t n);
// out[i] = cap * Tanh(x[i] / cap).
void SoftcapRow(const float* x, float cap, float* out, int64_t n);
// Softmax numerators of a row of scores, in place: x[i] = SoftmaxWeight(x[i] - max(x)). Returns
// their sum in DotF32's order: eight lanes (element i into lane i % 8, ascending i), then
// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)).
float SoftmaxRow(float* x, int64_t n);
// The same with level `isa`'s loops (CpuHasIsa(isa) must hold): tests compare levels.
void GeluMulRowIsa(quant::Isa isa, const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowIsa(quant::Isa isa, const float* x, float cap, float* out, int64_t n);
float SoftmaxRowIsa(quant::Isa isa, float* x, int64_t n);

namespace detail {
// The AVX2 loops over the first n / 8 * 8 elements (the callers finish the rest).
void GeluMulRowAvx2(const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n);
float MaxRowAvx2(const float* x, int64_t n, float mx);  // max(mx, x[0, n / 8 * 8))
void SoftmaxWeightsAvx2(float* x, float mx, int64_t n);
// lanes[j] += x[8 i + j] in ascending i, over the first n / 8 * 8 elements (both x86 levels).
void AddToLanes8Avx2(const float* x, int64_t n, float* lanes);
// The AVX-512 loops over the first n / 16 * 16 elements.
void GeluMulRowAvx512(const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowAvx512(const float* x, float cap, float* out, int64_t n);
float MaxRowAvx512(const float* x, int64_t n, float mx);
void SoftmaxWeightsAvx512(float* x, float mx, int64_t n);
}  // namespace detail

}  // namespace lockstep::backend

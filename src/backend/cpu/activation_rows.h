// Element-wise activation rows for the CPU backend: GELU (tanh form) times a second row, and the
// logit softcap, over whole rows. The portable loops call backend/activations.h; the AVX2 and
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
// The same with level `isa`'s loops (CpuHasIsa(isa) must hold): tests compare levels.
void GeluMulRowIsa(quant::Isa isa, const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowIsa(quant::Isa isa, const float* x, float cap, float* out, int64_t n);

namespace detail {
// The AVX2 loops over the first n / 8 * 8 elements (the callers finish the rest).
void GeluMulRowAvx2(const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n);
// The AVX-512 loops over the first n / 16 * 16 elements.
void GeluMulRowAvx512(const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowAvx512(const float* x, float cap, float* out, int64_t n);
}  // namespace detail

}  // namespace lockstep::backend

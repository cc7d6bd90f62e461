// Element-wise activation rows for the CPU backend: GELU (tanh form) times a second row, and the
// logit softcap, over whole rows. The portable loops call backend/activations.h; the AVX2
// versions (activation_rows_avx2.cpp) evaluate the same IEEE operations, in the same order and
// precision, four lanes at a time, so every level gives the same bits.
#pragma once

#include <cstdint>

namespace lockstep::backend {

// out[i] = GeluTanh(gate[i]) * up[i].
void GeluMulRow(const float* gate, const float* up, float* out, int64_t n);
// out[i] = cap * Tanh(x[i] / cap).
void SoftcapRow(const float* x, float cap, float* out, int64_t n);

namespace detail {
// The AVX2 loops over the first n / 4 * 4 elements (the callers finish the rest).
void GeluMulRowAvx2(const float* gate, const float* up, float* out, int64_t n);
void SoftcapRowAvx2(const float* x, float cap, float* out, int64_t n);
}  // namespace detail

}  // namespace lockstep::backend

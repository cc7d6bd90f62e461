// Integer dot kernels for Q4_1/Q5_0/Q5_1 (portable + AVX2) and AVX2 kernels for Q2_K/Q3_K.
//
// Same contract as dot_internal.h: exact per-block integers, one fixed scalar float expression
// per block, Acc8 reduction. Kept apart from dot_portable.cpp / dot_avx2.cpp so the dispatch
// (PortableDot / Avx2Dot / ActivationFormat) can adopt them by delegating to these functions.
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/dot_internal.h"

namespace lockstep::quant::detail {

// kQ8x32 for Q4_1, Q5_0, Q5_1; kF32 (no opinion) for every other type.
ActFormat ActivationFormatExtra(DType t);
// Q4_1, Q5_0, Q5_1; nullptr otherwise (defined in dot_portable_extra.cpp).
RowDotFn PortableDotExtra(DType t);
// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K; nullptr otherwise (defined in dot_extra_avx2.cpp). Results
// equal PortableDotExtra (Q4_1/Q5_0/Q5_1) and PortableDot (Q2_K/Q3_K) bit for bit.
RowDotFn Avx2DotExtra(DType t);

// Header-local for the same reason as dot_internal.h: each translation unit (portable or AVX2)
// gets its own copy, so no AVX-encoded body can be linked into portable callers.
namespace {

// Block layouts (bytes): Q4_1 {f16 d, f16 m, qs[16]}; Q5_0 {f16 d, u32 qh, qs[16]};
// Q5_1 {f16 d, f16 m, u32 qh, qs[16]}. Element j < 16 is the low nibble of qs[j], element
// j + 16 its high nibble; bit e of qh is the fifth bit of element e.
constexpr int kQ4_1Bytes = 20;
constexpr int kQ5_0Bytes = 22;
constexpr int kQ5_1Bytes = 24;

// Weights with an offset (Q4_1, Q5_1): w = d*q + m, so per block
//   sum w*x = (d*dx)*isum + (m*dx)*xsum,  isum = sum q*xq,  xsum = sum xq  (both exact ints).
// The min term is added (not subtracted as in CombineMin) because m is stored signed.
inline float CombineAddMin(float d, float m, float dx, int32_t isum, int32_t xsum) {
  return (d * dx) * static_cast<float>(isum) + (m * dx) * static_cast<float>(xsum);
}

inline float ExtraActScale(const uint8_t* blk) {
  float d;
  std::memcpy(&d, blk, 4);
  return d;
}

}  // namespace

}  // namespace lockstep::quant::detail

// Pieces shared by the AVX2 and AVX-512 multi-row float matmuls (matmul_rows.h's contract).
// Include only from *_avx2.cpp / *_avx512.cpp: everything is header-local (anonymous
// namespace), so each ISA's translation unit compiles its own copy and no wider-ISA body can be
// linked into a narrower caller (the same rule as quant/dot_x86.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_rows.h"
#include "quant/dot_x86.h"

namespace lockstep::backend {
namespace {

enum class W { kF32, kF16, kBF16 };

template <W kW>
constexpr int kBytes = kW == W::kF32 ? 4 : 2;

// One weight as a float (every conversion is exact).
template <W kW>
inline float Load1(const uint8_t* w, int64_t i) {
  float f;
  if constexpr (kW == W::kF32) {
    std::memcpy(&f, w + 4 * i, 4);
  } else if constexpr (kW == W::kF16) {
    f = quant::detail::Half(w + 2 * i);
  } else {
    uint16_t b;
    std::memcpy(&b, w + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    std::memcpy(&f, &u, 4);
  }
  return f;
}

// Completes one output element from its 8 lane sums over the first n & ~7 elements: the tail
// elements into lanes 0.., then DotF32's tree.
template <W kW>
inline float TailAndTree(const float* lane_sums, const uint8_t* w, const float* x, int64_t n) {
  float lanes[8];
  std::memcpy(lanes, lane_sums, sizeof(lanes));
  for (int64_t j = n & ~int64_t{7}, k = 0; j < n; ++j, ++k) lanes[k] += Load1<kW>(w, j) * x[j];
  const float s0 = (lanes[0] + lanes[4]) + (lanes[1] + lanes[5]);
  const float s1 = (lanes[2] + lanes[6]) + (lanes[3] + lanes[7]);
  return s0 + s1;
}

// The block's rows in chunks whose lane accumulators fit the scratch: chunk(r0, rows).
template <typename ChunkFn>
inline void ForRowChunks(const RowsBlock& b, ChunkFn chunk) {
  for (int64_t r0 = 0; r0 < b.n_rows; r0 += kRowsChunk)
    chunk(r0, std::min(kRowsChunk, b.n_rows - r0));
}

}  // namespace
}  // namespace lockstep::backend

// The dp4a GEMV's column machinery (matmul_int.cu, matmul_int_staged.cuh): one warp per output
// column whose 8 groups of 4 lanes take weight blocks b = g, g + 8, ... in ascending order, so
// group g's running sum is the CPU's partial b % 8 = g, added in the CPU's order; the fixed tree
// of quant::detail::Acc8 ends it.
#pragma once

#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/matmul_int.h"

namespace lockstep::backend::cuda::intmm {

inline constexpr int kColsPerBlock = 8;  // warps per block, one output column each

// The Acc8 tree over the groups' partials (group g's value in its lanes): lane 0 ends with
// ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)).
__device__ __forceinline__ float Acc8Tree(float a) {
  const float p = __fadd_rn(a, __shfl_down_sync(0xffffffffu, a, 16));
  const float q = __fadd_rn(p, __shfl_down_sync(0xffffffffu, p, 4));
  return __fadd_rn(q, __shfl_down_sync(0xffffffffu, q, 8));
}

// The activation rows of a dot, in global memory: row r of the dot is activation row xr[r].
template <class F>
struct GlobalRows {
  const ActRows& x;
  const int64_t* xr;
  __device__ auto Levels(int r, int64_t b) const {
    const int8_t* q = x.q + xr[r] * x.k + b * F::kElems;
    if constexpr (F::kElems == 256)
      return intq::GlobalLevels{reinterpret_cast<const int4*>(q)};
    else
      return q;
  }
  __device__ const int16_t* Bsum(int r, int64_t b) const {
    return x.bsum + xr[r] * (x.k / 16) + b * 16;
  }
  __device__ float Scale(int r, int64_t b) const { return x.d[xr[r] * (x.k / F::kElems) + b]; }
};

// The U raw blocks b0 + g, b0 + 8 + g, ... of group g (zeros past the row): only loads, so all
// are in flight before any is used.
template <class F, int U>
__device__ __forceinline__ void LoadStripe(const uint8_t* __restrict__ wrow, int64_t nblk,
                                           int64_t b0, typename F::Raw (&raw)[U]) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t b = b0 + 8 * u + g;
    raw[u] = {};
    if (b < nblk) F::LoadRaw(wrow + b * F::kBytes, t, raw[u]);
  }
}

// Adds the stripe's blocks into group g's partials acc[r] (rows r < nr of `x`), in ascending
// order. Every lane runs every shuffle (ok and r < nr are only masks on the arithmetic).
template <class F, int R, int U, class X>
__device__ __forceinline__ void FoldStripe(const typename F::Raw (&raw)[U], int64_t b0,
                                           int64_t nblk, const X& x, int nr, float* acc) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t b = b0 + 8 * u + g;
    const bool ok = b < nblk;
    typename F::Part part;
    if constexpr (std::is_same_v<typename F::Raw, typename F::Part>)
      part = raw[u];
    else
      F::Unpack(raw[u], t, part);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;  // uniform over the warp
      int isum = 0, imin = 0;
      if (ok) F::Dot(part, x.Levels(r, b), x.Bsum(r, b), t, &isum, &imin);
      isum += __shfl_xor_sync(0xffffffffu, isum, 1);
      isum += __shfl_xor_sync(0xffffffffu, isum, 2);
      if (F::kMin) {
        imin += __shfl_xor_sync(0xffffffffu, imin, 1);
        imin += __shfl_xor_sync(0xffffffffu, imin, 2);
      }
      if (ok) acc[r] = __fadd_rn(acc[r], F::Contribution(part, x.Scale(r, b), isum, imin));
    }
  }
}

// Many rows need the registers for their dots: then 256-blocks are loaded 2 at a time.
template <class F, int R>
constexpr int StripeUnroll() {
  return R > 2 && F::kElems == 256 ? 2 : F::kUnroll;
}

// Dots of one weight row with R activation rows xr[0..nr): acc[r] ends as group g's partial.
template <class F, int R>
__device__ __forceinline__ void DotColumn(const uint8_t* __restrict__ wrow, int64_t nblk,
                                          const ActRows& x, const int64_t* xr, int nr, float* acc) {
  constexpr int U = StripeUnroll<F, R>();
  const GlobalRows<F> rows{x, xr};
  for (int64_t b0 = 0; b0 < nblk; b0 += 8 * U) {
    typename F::Raw raw[U];
    LoadStripe<F, U>(wrow, nblk, b0, raw);
    FoldStripe<F, R, U>(raw, b0, nblk, rows, nr, acc);
  }
}

// Into L2, the lines of group g's first-stripe blocks g, 8 + g, ... that DotColumn loads first
// (lane t of the group takes the line at a quarter t of the block: every line a block touches).
template <class F, int R>
__device__ __forceinline__ void PrefetchStripe(const uint8_t* __restrict__ wrow, int64_t nblk) {
  constexpr int U = StripeUnroll<F, R>();
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t b = 8 * u + g;
    if (b < nblk)
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wrow + b * F::kBytes + t * (F::kBytes / 4)));
  }
}

}  // namespace lockstep::backend::cuda::intmm

// Device helpers shared by the CUDA kernels: the one warp reduction every kernel uses (a fixed
// butterfly, so a sum's order never depends on the launch).
#pragma once

#include "backend/cuda/common.h"

namespace lockstep::backend::cuda {

// Sum over the 32 lanes of a warp by xor butterfly (16, 8, 4, 2, 1): every lane ends with the
// same value, and the order of additions is fixed by lane numbers alone.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

}  // namespace lockstep::backend::cuda

// Launchers of the integer path's raw-block tensor-core kernels (mma_pipeline.cuh):
// matmul_mma_k4.cu for Q4_K and Q5_K, matmul_mma_q6k.cu for Q6_K, matmul_mma_b32.cu for Q8_0,
// Q5_0 and Q4_0 (no split launch; false also for rows past its schedule table). Their outputs are
// quant::DotRow's, bit for bit. Included by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/matmul_int.h"
#include "backend/cuda/mma_common.cuh"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

// y rows of `map` (`tiles` row tiles) = x · Wᵀ; false, launching nothing, for types other than
// the launcher's. The caller has checked that the device has int8 MMA. With y2 (dense products
// only, as many floats as y) the launch is split in two halves of the partials (twice the
// blocks, for grids that fill few waves): y gets the first half's totals and y2 the second's,
// and y + y2, added by the caller, is the unsplit launch's y bit for bit.
bool LaunchIntMmaK4(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                    const ActRows& x, const MmaRows& map, unsigned tiles, float* y, float* y2,
                    cudaStream_t stream);
bool LaunchIntMmaQ6K(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const ActRows& x, const MmaRows& map, unsigned tiles, float* y, float* y2,
                     cudaStream_t stream);
// Rows of at most this many 32-element blocks take matmul_mma_b32.cu's kernel (its schedule is a
// table in shared memory): k up to 32,768, past every Gemma 4 width.
inline constexpr int64_t kMaxB32Blocks = 1024;
// False for a 32-element format whose rows are longer than kMaxB32Blocks (true otherwise).
inline bool B32RowFits(DType type, int64_t k) {
  return Info(type).block_size != 32 || k / 32 <= kMaxB32Blocks;
}
bool LaunchIntMmaB32(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const ActRows& x, const MmaRows& map, unsigned tiles, float* y,
                     cudaStream_t stream);

}  // namespace lockstep::backend::cuda

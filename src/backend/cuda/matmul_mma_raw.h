// Launchers of the integer path's raw-block tensor-core kernels (mma_pipeline.cuh):
// matmul_mma_k4.cu for Q4_K and Q5_K, matmul_mma_q6k.cu for Q6_K. The same outputs as
// matmul_mma.cu's kernel and quant::DotRow, bit for bit. Included by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/matmul_int.h"
#include "backend/cuda/mma_common.cuh"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

// y rows of `map` (`tiles` row tiles) = x · Wᵀ; false, launching nothing, for types other than
// the launcher's (and while its kernel is off). The caller has checked that the device has int8
// MMA.
bool LaunchIntMmaK4(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                    const ActRows& x, const MmaRows& map, unsigned tiles, float* y,
                    cudaStream_t stream);
bool LaunchIntMmaQ6K(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const ActRows& x, const MmaRows& map, unsigned tiles, float* y,
                     cudaStream_t stream);

}  // namespace lockstep::backend::cuda

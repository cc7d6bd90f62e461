// Launcher of the integer path's tensor-core kernel for Q4_K and Q5_K (matmul_mma_k4.cu): the
// same outputs as matmul_mma.cu's kernel and quant::DotRow, bit for bit. Included by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/matmul_int.h"
#include "backend/cuda/mma_common.cuh"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

// y rows of `map` (`tiles` row tiles) = x · Wᵀ for Q4_K / Q5_K weights; false, launching
// nothing, for other types. The caller has checked that the device has int8 MMA.
bool LaunchIntMmaK4(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                    const ActRows& x, const MmaRows& map, unsigned tiles, float* y,
                    cudaStream_t stream);

}  // namespace lockstep::backend::cuda

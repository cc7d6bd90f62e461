// Launchers of the integer path's tensor-core kernels (matmul_mma.cu): the same outputs as the
// dp4a kernels of matmul_int.cu, bit for bit, with weights read once per 32 activation rows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

// Fewest expert tasks (gathered) or dense rows for which the integer path always uses the
// tensor-core kernels.
inline constexpr int64_t kMmaMinRows = 16;

// Whether a dense rows x n_out product of `type` takes the tensor-core kernel: from kMmaMinRows
// rows; from 3 rows (LOCKSTEP_CUDA_MMA_FEW_ROWS, for A/B timing) for the raw-block types where
// the launch's blocks cover the device's multiprocessors by at least 5/4 (its cost is flat up
// to 32 rows, the dp4a kernel's grows with them; a smaller grid leaves multiprocessors idle).
// The same bits either way: both kernels equal quant::DotRow.
bool DenseTakesIntMma(DType type, int64_t rows, int64_t n_out);

// y = x · Wᵀ over activation rows already quantized for `type` (x); false, launching nothing,
// if the type has no integer-path kernel or the device no int8 MMA (before sm_80). `split`:
// rows x n_out floats of scratch exactly where SplitsIntMma, else null; the raw-block kernels
// then run the launch as two halves of the partials and add them (the same bits).
bool LaunchIntMma(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                  const ActRows& x, int64_t rows, float* y, float* split, cudaStream_t stream);

// Whether LaunchIntMma splits a dense rows x n_out product of `type` (a raw-block type on the
// tensor cores whose launch, in two halves, still fits one wave of the device).
bool SplitsIntMma(DType type, int64_t rows, int64_t n_out);

// Device bytes of the tile table LaunchIntMmaGrouped builds for `tasks` tasks over n_expert.
size_t ExpertTileBytes(int64_t tasks, int n_expert);

// The gathered form for expert tasks (m.experts set, m.ids null): tasks grouped by expert into
// tiles (a table built on the device in `tiles`, ExpertTileBytes), each tile one tensor-core
// block reading its expert's weights once. Same bits as the gathered dp4a kernel. False,
// launching nothing, where LaunchIntMma would be false or the form is not expert tasks.
bool LaunchIntMmaGrouped(const GatheredMatMul& m, int n_expert, const ActRows& x, void* tiles,
                         cudaStream_t stream);

}  // namespace lockstep::backend::cuda

// Launchers of the matmul kernels: y = x · Wᵀ for weights in their GGUF block formats.
// Contract of the float kernels (the integer path has its own, matmul_int.h): output element (r, j)
// is the sum of 32 per-lane partial sums combined by one fixed butterfly; lane l accumulates chunks
// l, l + 32, ... of the row in ascending order. Nothing in that order depends on how many rows,
// tasks or columns a launch carries.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::backend::cuda {

// True when the matmul and get-rows kernels read `t` natively.
bool HasNativeFormat(DType t);

// y[r][j] = dot(x[r], w row j), r < rows, j < n_out; x is [rows, k] (k a multiple of 32).
// Types on the integer path (matmul_int.h) run there and need `act`, a device scratch of
// IntActivationBytes(type, rows, k) bytes; the float kernels ignore it.
void LaunchMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                  const float* x, int64_t rows, float* y, void* act, cudaStream_t stream);

// The float kernels (dequantized weights, float activations) for any native format, the
// integer-path types included: their row results differ from the integer path's (the tests'
// negative control and the benches' comparison).
void LaunchFloatMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                       const float* x, int64_t rows, float* y, cudaStream_t stream);

struct ActRows;  // matmul_int.h

// Tasks with their own weight rows: task t reads x row t / x_div and writes n_out outputs
// y[t][j] = dot(x[t / x_div], w row R(t, j)) with
//   R(t, j) = (experts ? experts[t] * rows_per_expert : 0) + (ids ? ids[t * n_out + j] : j).
struct GatheredMatMul {
  DType type;
  const void* w;
  int64_t row_bytes, k, n_out;
  const float* x;
  int64_t x_div;
  const int32_t* ids;      // device, [tasks, n_out], or null
  const int32_t* experts;  // device, [tasks], or null
  int64_t rows_per_expert;
  int64_t tasks;
  float* y;  // [tasks, n_out]
  // Integer-path types: scratch of IntActivationBytes(type, ceil(tasks / x_div), k) bytes.
  void* act = nullptr;
  // Expert tasks of many rows on the integer path: the number of experts and a scratch of
  // ExpertTileBytes(tasks, n_expert) (matmul_mma.h) let the tensor-core kernel group tasks by
  // expert; without them each task reads its weights alone (same bits).
  int n_expert = 0;
  void* tiles = nullptr;
  // `tiles` already holds the table of these tasks (an earlier matmul of the same experts and
  // tasks built it): the launch reads it instead of building it again.
  bool tiles_ready = false;
  // Integer-path types: the x rows already quantized for this type's activation block (then
  // `act` is not used), or null.
  const ActRows* xq = nullptr;
};
void LaunchGatheredMatMul(const GatheredMatMul& m, cudaStream_t stream);

// y[r] = dequant(table row ids[r]) * scale, r < rows; the table has `k` columns.
void LaunchGetRows(DType type, const void* table, int64_t row_bytes, int64_t k, const int32_t* ids,
                   int64_t rows, float scale, float* y, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

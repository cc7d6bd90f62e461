// Launcher of RMSNorm over groups of consecutive values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace lockstep::backend::cuda {

// y = x / sqrt(mean(x^2) + eps) * w * extra_scale over each group of `group` values of each
// row (w: `group` device floats, or null), plus residual (same shape as x, or null) in a
// separate rounding after the scale: RmsNorm then Add, fused. x and y may alias; y and the
// residual may not.
void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream,
                   const float* residual = nullptr);

// An output's quantized copy, written by the norm's kernel from the floats it stores: the bytes
// QuantizeActivations (matmul_int.h) writes into `act` for weights of activation block length
// `block` (32 or 256; 0: no copy) from those floats read back, so a matmul of the output may
// skip its quantization launch. Needs CanQuantizeInNorm.
struct NormQuant {
  int block = 0;
  void* act = nullptr;  // ActivationBytes(block, rows, cols)
};
// Whether the whole-row norm kernel can quantize rows of `cols` values in blocks of `block`
// (the row held in registers: 1,024 to 6,144 values, a multiple of the block).
bool CanQuantizeInNorm(int64_t cols, int block);

// Whole-row RMSNorms of one input with up to three weights (w may be null) and extra scales, in
// one launch: each output has the bits LaunchRmsNorm gives it alone, and its quantized copy
// where `quant` asks for one. False, launching nothing, for rows under 1,024 values or more than
// three outputs. No output may alias x.
struct RmsNormOut {
  const float* w;
  float extra_scale;
  float* y;
  NormQuant quant = {};
};
bool LaunchRmsNorms(const float* x, float eps, int64_t rows, int64_t cols,
                    std::span<const RmsNormOut> outs, cudaStream_t stream);

// y = RmsNorm(RmsNorm(a, wa) + RmsNorm(b, wb), w) + residual over whole rows in one launch,
// with the bits of LaunchRmsNorm then two residual LaunchRmsNorms. False, launching nothing,
// for rows outside 1,024..6,144 values. y aliases none of the inputs.
bool LaunchRmsNormSumNormAdd(const float* a, const float* wa, const float* b, const float* wb,
                             const float* w, float eps, int64_t rows, int64_t cols,
                             const float* residual, float* y, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

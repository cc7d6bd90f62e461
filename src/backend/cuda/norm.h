// Launcher of RMSNorm over groups of consecutive values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// y = x / sqrt(mean(x^2) + eps) * w * extra_scale over each group of `group` values of each
// row (w: `group` device floats, or null), plus residual (same shape as x, or null) in a
// separate rounding after the scale: RmsNorm then Add, fused. x and y may alias; y and the
// residual may not.
void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream,
                   const float* residual = nullptr);

}  // namespace lockstep::backend::cuda

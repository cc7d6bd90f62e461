// Launcher of RMSNorm over groups of consecutive values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// y = x / sqrt(mean(x^2) + eps) * w * extra_scale over each group of `group` values of each
// row (w: `group` device floats, or null). x and y may alias.
void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

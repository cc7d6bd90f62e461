// Launchers of the element-wise and copy kernels (each output element from its own inputs).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

enum class Binary { kAdd, kMul };
enum class Unary { kGelu, kSoftcap };

// y[i] = a[i] op b[i], i < n.
void LaunchBinary(Binary op, const float* a, const float* b, float* y, int64_t n,
                  cudaStream_t stream);
// y[i] = a[i] * (scale_dev ? *scale_dev : scale), i < n (scale_dev: a device float).
void LaunchScale(const float* a, float scale, const float* scale_dev, float* y, int64_t n,
                 cudaStream_t stream);
// y[i] = gelu_tanh(x[i]) or c * tanh(x[i] / c), i < n.
void LaunchUnary(Unary op, const float* x, float c, float* y, int64_t n, cudaStream_t stream);
// y[r][i] = gelu_tanh(gate[r][gate_col + i]) * up[r][up_col + i], i < width.
void LaunchGeluMul(const float* gate, int64_t gate_stride, int64_t gate_col, const float* up,
                   int64_t up_stride, int64_t up_col, int64_t width, int64_t rows, float* y,
                   cudaStream_t stream);
// dst[r * dst_stride + i] = src[r * src_stride + i], i < width, r < rows.
void LaunchCopy2D(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                  int64_t rows, int64_t width, cudaStream_t stream);
// y[dst ? dst[i] : i] = x[src ? src[i] : i] (rows of `cols` floats), i < n; indices on device.
void LaunchCopyRows(const float* x, const int32_t* src, float* y, const int32_t* dst, int64_t n,
                    int64_t cols, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

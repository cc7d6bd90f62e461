// Element-wise and copy kernels: one thread per output element (grid-stride), arithmetic in
// the same order as the CPU backend's (the shared activation functions, no contraction).
#include <algorithm>

#include "backend/activations.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/elementwise.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8));
}

__global__ void BinaryKernel(Binary op, const float* a, const float* b, float* y, int64_t n) {
  AwaitPriorKernels();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = op == Binary::kAdd ? a[i] + b[i] : a[i] * b[i];
}

__global__ void ScaleKernel(const float* a, float s, const float* s_dev, float* y, int64_t n) {
  AwaitPriorKernels();
  const float scale = s_dev ? *s_dev : s;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = a[i] * scale;
}

__global__ void UnaryKernel(Unary op, const float* x, float c, float* y, int64_t n) {
  AwaitPriorKernels();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = op == Unary::kGelu ? GeluTanh(x[i]) : c * Tanh(x[i] / c);
}

__global__ void GeluMulKernel(const float* gate, int64_t gate_stride, const float* up,
                              int64_t up_stride, int64_t width, int64_t n, float* y) {
  AwaitPriorKernels();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    y[i] = GeluTanh(gate[r * gate_stride + c]) * up[r * up_stride + c];
  }
}

__global__ void Copy2DKernel(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                             int64_t width, int64_t n) {
  AwaitPriorKernels();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

__global__ void CopyRowsKernel(const float* x, const int32_t* src, float* y, const int32_t* dst,
                               int64_t cols, int64_t n) {
  AwaitPriorKernels();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t from = src ? src[r] : r, to = dst ? dst[r] : r;
    y[to * cols + c] = x[from * cols + c];
  }
}

}  // namespace

void LaunchBinary(Binary op, const float* a, const float* b, float* y, int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, b, y, n);
  LS_CUDA_LAUNCHED();
}

void LaunchScale(const float* a, float scale, const float* scale_dev, float* y, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(a, scale, scale_dev, y, n);
  LS_CUDA_LAUNCHED();
}

void LaunchUnary(Unary op, const float* x, float c, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, x, c, y, n);
  LS_CUDA_LAUNCHED();
}

void LaunchGeluMul(const float* gate, int64_t gate_stride, int64_t gate_col, const float* up,
                   int64_t up_stride, int64_t up_col, int64_t width, int64_t rows, float* y,
                   cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  GeluMulKernel<<<Blocks(n), kThreads, 0, stream>>>(gate + gate_col, gate_stride, up + up_col,
                                                    up_stride, width, n, y);
  LS_CUDA_LAUNCHED();
}

void LaunchCopy2D(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                  int64_t rows, int64_t width, cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  Copy2DKernel<<<Blocks(n), kThreads, 0, stream>>>(src, src_stride, dst, dst_stride, width, n);
  LS_CUDA_LAUNCHED();
}

void LaunchCopyRows(const float* x, const int32_t* src, float* y, const int32_t* dst, int64_t n,
                    int64_t cols, cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  CopyRowsKernel<<<Blocks(n * cols), kThreads, 0, stream>>>(x, src, y, dst, cols, n * cols);
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

// RMSNorm: one warp per (row, group) for head-sized groups, one block per row for whole rows;
// either way the sum of squares runs in an order fixed by the group length alone, the same for
// any number of rows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/norm.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void RmsNormKernel(const float* x, const float* w, float eps, int64_t group,
                              float extra_scale, int64_t items, float* y) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (item >= items) return;
  const float* xg = x + item * group;
  float* yg = y + item * group;
  float ss = 0.0f;
  // Unrolled so that a lane's loads are in flight together (one warp reads a whole row: the
  // loop would otherwise wait on memory once per element); the fmaf chain keeps its order.
#pragma unroll 8
  for (int64_t i = lane; i < group; i += kWarp) ss = fmaf(xg[i], xg[i], ss);
  ss = WarpSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(group) + eps);
#pragma unroll 8
  for (int64_t i = lane; i < group; i += kWarp) {
    float v = xg[i] * inv;
    if (w) v *= w[i];
    yg[i] = v * extra_scale;
  }
}

// Long groups (a whole row of 1024 or more): one block of kRowThreads per group, thread t
// summing elements t, t + kRowThreads, ... (a fmaf chain), the butterfly per warp, then the
// warp sums in ascending warp order. The order depends on the group length alone.
constexpr int kRowThreads = 256;
constexpr int64_t kLongGroup = 1024;

__global__ void __launch_bounds__(kRowThreads)
    RmsNormRowKernel(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                     float* y) {
  __shared__ float warp_sums[kRowThreads / kWarp];
  const float* xg = x + static_cast<int64_t>(blockIdx.x) * group;
  float* yg = y + static_cast<int64_t>(blockIdx.x) * group;
  float ss = 0.0f;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < group; i += kRowThreads) ss = fmaf(xg[i], xg[i], ss);
  ss = WarpSum(ss);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowThreads / kWarp; ++i) total += warp_sums[i];
  const float inv = 1.0f / sqrtf(total / static_cast<float>(group) + eps);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < group; i += kRowThreads) {
    float v = xg[i] * inv;
    if (w) v *= w[i];
    yg[i] = v * extra_scale;
  }
}

}  // namespace

void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream) {
  LS_CUDA_REQUIRE(group > 0 && cols % group == 0, "cuda rms_norm: group %lld of %lld columns",
                  static_cast<long long>(group), static_cast<long long>(cols));
  const int64_t items = rows * (cols / group);
  if (items == 0) return;
  if (group >= kLongGroup) {
    LS_CUDA_REQUIRE(items <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(items));
    RmsNormRowKernel<<<static_cast<unsigned>(items), kRowThreads, 0, stream>>>(x, w, eps, group,
                                                                               extra_scale, y);
  } else {
    RmsNormKernel<<<CeilDiv(items, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, stream>>>(
        x, w, eps, group, extra_scale, items, y);
  }
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

// RMSNorm: one warp per (row, group) for head-sized groups, one block per row for whole rows;
// either way the sum of squares runs in an order fixed by the group length alone, the same for
// any number of rows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/norm.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void RmsNormKernel(const float* x, const float* w, float eps, int64_t group,
                              float extra_scale, const float* residual, int64_t items, float* y) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (item >= items) return;
  const float* xg = x + item * group;
  float* yg = y + item * group;
  const float* rg = residual ? residual + item * group : nullptr;
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
    v = v * extra_scale;
    yg[i] = rg ? v + rg[i] : v;
  }
}

// Long groups (a whole row of 1024 or more): one block of kRowThreads per group, thread t
// summing elements t, t + kRowThreads, ... (a fmaf chain), the butterfly per warp, then the
// warp sums in ascending warp order. The order depends on the group length alone. kPer > 0:
// the thread's kPer elements and weights are loaded into registers at once (one memory latency
// instead of one per unrolled batch; a single block per row is latency-bound); 0: streamed.
constexpr int kRowThreads = 256;
constexpr int64_t kLongGroup = 1024;

// Up to three outputs of one row: y[o] = x * inv * w[o] * scale[o] (w[o] may be null), each by
// the single-output expression, so a fused launch gives each output the bits of its own.
struct RowOuts {
  const float* w[3];
  float scale[3];
  float* y[3];
};

template <int kPer, int kOuts>
__global__ void __launch_bounds__(kRowThreads)
    RmsNormRowKernel(const float* x, float eps, int64_t group, RowOuts outs,
                     const float* residual) {
  __shared__ float warp_sums[kRowThreads / kWarp];
  const int64_t row = blockIdx.x;
  const float* xg = x + row * group;
  const float* rg = residual ? residual + row * group : nullptr;
  // Every output's weights are loaded with x: one memory latency for the whole row.
  float xv[kPer > 0 ? kPer : 1], wv[kOuts][kPer > 0 ? kPer : 1];
  float ss = 0.0f;
  if constexpr (kPer > 0) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
      xv[j] = i < group ? xg[i] : 0.0f;
#pragma unroll
      for (int o = 0; o < kOuts; ++o) wv[o][j] = outs.w[o] && i < group ? outs.w[o][i] : 1.0f;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (threadIdx.x + static_cast<int64_t>(j) * kRowThreads < group) ss = fmaf(xv[j], xv[j], ss);
  } else {
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < group; i += kRowThreads) ss = fmaf(xg[i], xg[i], ss);
  }
  ss = WarpSum(ss);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowThreads / kWarp; ++i) total += warp_sums[i];
  const float inv = 1.0f / sqrtf(total / static_cast<float>(group) + eps);
#pragma unroll
  for (int o = 0; o < kOuts; ++o) {
    const float* wo = outs.w[o];
    const float scale = outs.scale[o];
    float* yg = outs.y[o] + row * group;
    if constexpr (kPer > 0) {
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
        if (i >= group) break;
        float v = xv[j] * inv;
        if (wo) v *= wv[o][j];
        v = v * scale;
        yg[i] = rg ? v + rg[i] : v;
      }
    } else {
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < group; i += kRowThreads) {
        float v = xg[i] * inv;
        if (wo) v *= wo[i];
        v = v * scale;
        yg[i] = rg ? v + rg[i] : v;
      }
    }
  }
}

template <int kOuts>
void LaunchRow(const float* x, float eps, int64_t group, const RowOuts& outs, const float* residual,
               int64_t items, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(items);
  // Same per-thread order in every variant: only how many loads are in flight differs.
  if (group <= 8 * kRowThreads)
    RmsNormRowKernel<8, kOuts><<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
  else if (group <= 24 * kRowThreads)
    RmsNormRowKernel<24, kOuts><<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
  else
    RmsNormRowKernel<0, kOuts><<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
}

}  // namespace

void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream,
                   const float* residual) {
  LS_CUDA_REQUIRE(group > 0 && cols % group == 0, "cuda rms_norm: group %lld of %lld columns",
                  static_cast<long long>(group), static_cast<long long>(cols));
  const int64_t items = rows * (cols / group);
  if (items == 0) return;
  if (group >= kLongGroup) {
    LS_CUDA_REQUIRE(items <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(items));
    LaunchRow<1>(x, eps, group, RowOuts{{w}, {extra_scale}, {y}}, residual, items, stream);
  } else {
    RmsNormKernel<<<CeilDiv(items, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, stream>>>(
        x, w, eps, group, extra_scale, residual, items, y);
  }
  LS_CUDA_LAUNCHED();
}

bool LaunchRmsNorms(const float* x, float eps, int64_t rows, int64_t cols,
                    std::span<const RmsNormOut> outs, cudaStream_t stream) {
  if (cols < kLongGroup || outs.empty() || outs.size() > 3) return false;
  LS_CUDA_REQUIRE(rows <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(rows));
  if (rows == 0) return true;
  RowOuts ro{};
  for (size_t o = 0; o < outs.size(); ++o)
    ro.w[o] = outs[o].w, ro.scale[o] = outs[o].extra_scale, ro.y[o] = outs[o].y;
  if (outs.size() == 1)
    LaunchRow<1>(x, eps, cols, ro, nullptr, rows, stream);
  else if (outs.size() == 2)
    LaunchRow<2>(x, eps, cols, ro, nullptr, rows, stream);
  else
    LaunchRow<3>(x, eps, cols, ro, nullptr, rows, stream);
  LS_CUDA_LAUNCHED();
  return true;
}

}  // namespace lockstep::backend::cuda

// MoE routing (one warp per row) and the fixed-order combination of expert outputs. The
// combination runs in ascending expert id, as the CPU backend's, so the order never depends on
// router ranking or on which rows share the step.
#include "backend/cuda/common.cuh"
#include "backend/cuda/moe.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kMaxExperts = 256;

__global__ void RouteKernel(const float* logits, int n_expert, int n_used, const float* scale,
                            int32_t* experts, float* weights) {
  __shared__ float p[kMaxExperts];
  __shared__ bool chosen[kMaxExperts];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  const float* lg = logits + r * n_expert;
  float mx = -INFINITY;
  for (int e = lane; e < n_expert; e += kWarp) mx = fmaxf(mx, lg[e]);
  mx = WarpMax(mx);
  float part = 0.0f;
  for (int e = lane; e < n_expert; e += kWarp) {
    p[e] = expf(lg[e] - mx);
    chosen[e] = false;
    part += p[e];
  }
  const float sum = WarpSum(part);
  for (int e = lane; e < n_expert; e += kWarp) p[e] /= sum;
  __syncwarp();
  // n_used rounds of a warp-wide argmax over the experts not yet chosen (ties: lower id).
  for (int k = 0; k < n_used; ++k) {
    float best = -INFINITY;
    int best_e = n_expert;
    for (int e = lane; e < n_expert; e += kWarp)
      if (!chosen[e] && (p[e] > best || best_e == n_expert)) best = p[e], best_e = e;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
      if (oe < n_expert && (best_e == n_expert || ob > best || (ob == best && oe < best_e)))
        best = ob, best_e = oe;
    }
    if (lane == 0) chosen[best_e] = true;
    __syncwarp();
  }
  if (lane != 0) return;
  float wsum = 0.0f;
  for (int e = 0; e < n_expert; ++e)
    if (chosen[e]) wsum += p[e];
  int s = 0;
  for (int e = 0; e < n_expert; ++e) {
    if (!chosen[e]) continue;
    experts[r * n_used + s] = e;
    weights[r * n_used + s] = p[e] / wsum * (scale ? scale[e] : 1.0f);
    ++s;
  }
}

__global__ void CombineKernel(const float* expert_out, const float* weights, int64_t rows,
                              int n_used, int64_t cols, float* y) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * cols;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / cols, j = t % cols;
    float acc = 0.0f;
    for (int s = 0; s < n_used; ++s)
      acc += weights[r * n_used + s] * expert_out[(r * n_used + s) * cols + j];
    y[t] = acc;
  }
}

}  // namespace

void LaunchMoeRoute(const float* router_logits, int64_t rows, int n_expert, int n_used,
                    const float* scale, int32_t* experts, float* weights, cudaStream_t stream) {
  LS_CUDA_REQUIRE(n_expert <= kMaxExperts && n_used >= 1 && n_used <= n_expert,
                  "cuda moe: %d of %d experts (at most %d)", n_used, n_expert, kMaxExperts);
  if (rows == 0) return;
  RouteKernel<<<static_cast<unsigned>(rows), kWarp, 0, stream>>>(router_logits, n_expert, n_used,
                                                                 scale, experts, weights);
  LS_CUDA_LAUNCHED();
}

void LaunchMoeCombine(const float* expert_out, const float* weights, int64_t rows, int n_used,
                      int64_t cols, float* y, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kThreads = 256;
  CombineKernel<<<CeilDiv(rows * cols, kThreads), kThreads, 0, stream>>>(expert_out, weights, rows,
                                                                         n_used, cols, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

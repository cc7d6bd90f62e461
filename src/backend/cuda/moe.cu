// MoE routing (one warp per row) and the fixed-order combination of expert outputs. The
// combination runs in ascending expert id, as the CPU backend's, so the order never depends on
// router ranking or on which rows share the step.
#include "backend/cuda/common.cuh"
#include "backend/cuda/moe.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kMaxExperts = 256;

// Integer max / min over the warp (order-free, so any reduction gives the same value): one
// redux instruction from sm_80 on, the butterfly before.
__device__ __forceinline__ int WarpMaxInt(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
#endif
}

__device__ __forceinline__ int WarpMinInt(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_min_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
#endif
}

// Router of one row in one warp, everything in registers (lane l holds experts l + 32 j, j <
// kPer): the softmax, n_used rounds of argmax over the experts not yet chosen (ties: lower id),
// then the chosen experts in ascending id with weights renormalised by a serial sum in ascending
// id, as the CPU's loop does. No lane walks all experts: one lane reading p and the flags from
// shared memory expert by expert, twice, took most of a 7 us kernel.
template <int kPer>
__global__ void __launch_bounds__(kWarp)
    RouteKernel(const float* logits, int n_expert, int n_used, const float* scale, int32_t* experts,
                float* weights) {
  AwaitPriorKernels();
  __shared__ float sel_p[kMaxExperts];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  const float* lg = logits + r * n_expert;
  float p[kPer], sc[kPer];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + kWarp * j;
    p[j] = e < n_expert ? lg[e] : 0.0f;
    sc[j] = scale && e < n_expert ? scale[e] : 1.0f;  // loaded now, used last
    if (e < n_expert) mx = fmaxf(mx, p[j]);
  }
  mx = WarpMax(mx);
  float part = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (lane + kWarp * j >= n_expert) continue;
    p[j] = expf(p[j] - mx);
    part += p[j];
  }
  const float sum = WarpSum(part);
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (lane + kWarp * j < n_expert) p[j] /= sum;

  unsigned chosen = 0;  // bit j: expert lane + 32 j
  // Every p in [+0, +inf] (always, unless a logit is NaN or infinite): p's bits as an int order
  // the experts as the float comparisons do, equal bits meaning equal values.
  bool plain = true;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (lane + kWarp * j < n_expert && __float_as_uint(p[j]) > 0x7f800000u) plain = false;
  if (__all_sync(0xffffffffu, plain)) {
    // Each lane sorts its experts once (key descending, slot ascending on ties: a total order,
    // so the list is unique); its first entry is then the lane's best unchosen expert, the
    // round's winner is the largest key's lowest id over the warp (two integer reductions), and
    // the winning lane drops its first entry. Out-of-range slots (key -1) never win: some valid
    // expert is unchosen in every round (n_used <= n_expert), and its key is >= 0.
    int key[kPer], slot[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      key[j] = lane + kWarp * j < n_expert ? __float_as_int(p[j]) : -1;
      slot[j] = j;
    }
#pragma unroll
    for (int pass = 0; pass < kPer; ++pass) {  // odd-even transposition: kPer passes sort kPer
#pragma unroll
      for (int j = pass % 2; j + 1 < kPer; j += 2) {
        if (key[j + 1] > key[j] || (key[j + 1] == key[j] && slot[j + 1] < slot[j])) {
          const int k = key[j], s = slot[j];
          key[j] = key[j + 1], slot[j] = slot[j + 1];
          key[j + 1] = k, slot[j + 1] = s;
        }
      }
    }
    for (int k = 0; k < n_used; ++k) {
      const int m = WarpMaxInt(key[0]);
      const int e0 = lane + kWarp * slot[0];
      const int win = WarpMinInt(key[0] == m ? e0 : kMaxExperts);
      if (e0 == win) {  // one lane: ids are distinct modulo 32
        chosen |= 1u << slot[0];
#pragma unroll
        for (int j = 0; j + 1 < kPer; ++j) key[j] = key[j + 1], slot[j] = slot[j + 1];
        key[kPer - 1] = -1;
      }
    }
  } else {
    // NaN or a sign bit somewhere: the float comparisons and butterfly themselves (with NaN they
    // are no total order, so only they give the same choice), lane 0's winner taken by all.
    for (int k = 0; k < n_used; ++k) {
      float best = -INFINITY;
      int best_e = n_expert;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = lane + kWarp * j;
        if (e < n_expert && !((chosen >> j) & 1u) && (p[j] > best || best_e == n_expert))
          best = p[j], best_e = e;
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, off);
        const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
        if (oe < n_expert && (best_e == n_expert || ob > best || (ob == best && oe < best_e)))
          best = ob, best_e = oe;
      }
      best_e = __shfl_sync(0xffffffffu, best_e, 0);
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        if (lane + kWarp * j == best_e) chosen |= 1u << j;
    }
  }

  // Expert lane + 32 j is number rank[j] of the chosen in ascending id (a ballot per slot); the
  // chosen p are gathered in that order so the weight sum runs in ascending id, serially.
  int rank[kPer];
  int before = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const bool c = (chosen >> j) & 1u;
    const unsigned b = __ballot_sync(0xffffffffu, c);
    rank[j] = before + __popc(b & ((1u << lane) - 1u));
    if (c) sel_p[rank[j]] = p[j];
    before += __popc(b);
  }
  __syncwarp();
  float wsum = 0.0f;
  for (int s = 0; s < n_used; ++s) wsum += sel_p[s];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (!((chosen >> j) & 1u)) continue;
    experts[r * n_used + rank[j]] = lane + kWarp * j;
    weights[r * n_used + rank[j]] = p[j] / wsum * sc[j];
  }
}

__global__ void CombineKernel(const float* expert_out, const float* weights, int64_t rows,
                              int n_used, int64_t cols, float* y) {
  AwaitPriorKernels();
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
  // Same bits either way: the slots past n_expert take no part.
  if (n_expert <= 4 * kWarp)
    RouteKernel<4><<<static_cast<unsigned>(rows), kWarp, 0, stream>>>(
        router_logits, n_expert, n_used, scale, experts, weights);
  else
    RouteKernel<8><<<static_cast<unsigned>(rows), kWarp, 0, stream>>>(
        router_logits, n_expert, n_used, scale, experts, weights);
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

// Greedy selection: one block per row; the maximum is exact and ties go to the lowest id, so
// the chosen id does not depend on the scan's split.
#include "backend/cuda/common.cuh"
#include "backend/cuda/select.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  return bi < 0 || v > bv || (v == bv && i < bi);
}

__global__ void ArgmaxKernel(const float* logits, int64_t n_vocab, const int32_t* rows,
                             const int32_t* out_index, int32_t* ids) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * n_vocab;
  float bv = 0.0f;
  int bi = -1;
  for (int64_t i = threadIdx.x; i < n_vocab; i += kThreads)
    if (Better(row[i], static_cast<int>(i), bv, bi)) bv = row[i], bi = static_cast<int>(i);
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const int oi = best_i[threadIdx.x + stride];
      if (oi >= 0 && Better(best_v[threadIdx.x + stride], oi, best_v[threadIdx.x],
                            best_i[threadIdx.x])) {
        best_v[threadIdx.x] = best_v[threadIdx.x + stride];
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[out_index[blockIdx.x]] = best_i[0];
}

}  // namespace

void LaunchArgmax(const float* logits, int64_t n_vocab, const int32_t* rows,
                  const int32_t* out_index, int64_t n, int32_t* ids, cudaStream_t stream) {
  if (n == 0) return;
  ArgmaxKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, n_vocab, rows,
                                                                  out_index, ids);
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

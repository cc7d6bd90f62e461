// Greedy selection in two passes: blocks find the best of fixed slices of a row, then one warp
// per row picks the best slice. The maximum is exact and ties go to the lowest id, a total
// order on (value, id), so the chosen id does not depend on the split (nor on the batch).
#include "backend/cuda/common.cuh"
#include "backend/cuda/select.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSlice = 8192;  // logits per block of the first pass

__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  return bi < 0 || v > bv || (v == bv && i < bi);
}

// One block per (slice, row): the best (value, id) of logits [slice * kSlice, +kSlice).
__global__ void SliceArgmaxKernel(const float* logits, int64_t n_vocab, const int32_t* rows,
                                  int n_slices, float* best_v, int* best_i) {
  AwaitPriorKernels();
  __shared__ float sv[kThreads];
  __shared__ int si[kThreads];
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.y]) * n_vocab;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSlice;
  const int64_t end = min(begin + kSlice, n_vocab);
  float bv = 0.0f;
  int bi = -1;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads)
    if (Better(row[i], static_cast<int>(i), bv, bi)) bv = row[i], bi = static_cast<int>(i);
  sv[threadIdx.x] = bv;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const int oi = si[threadIdx.x + stride];
      if (oi >= 0 && Better(sv[threadIdx.x + stride], oi, sv[threadIdx.x], si[threadIdx.x])) {
        sv[threadIdx.x] = sv[threadIdx.x + stride];
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    best_v[static_cast<int64_t>(blockIdx.y) * n_slices + blockIdx.x] = sv[0];
    best_i[static_cast<int64_t>(blockIdx.y) * n_slices + blockIdx.x] = si[0];
  }
}

// One warp per row: the best of its slices' winners.
__global__ void MergeArgmaxKernel(const float* best_v, const int* best_i, int n_slices,
                                  const int32_t* out_index, int32_t* ids) {
  AwaitPriorKernels();
  const int lane = threadIdx.x;
  const float* v = best_v + static_cast<int64_t>(blockIdx.x) * n_slices;
  const int* idx = best_i + static_cast<int64_t>(blockIdx.x) * n_slices;
  float bv = 0.0f;
  int bi = -1;
  for (int s = lane; s < n_slices; s += kWarp)
    if (idx[s] >= 0 && Better(v[s], idx[s], bv, bi)) bv = v[s], bi = idx[s];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (oi >= 0 && Better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  if (lane == 0) ids[out_index[blockIdx.x]] = bi;
}

int Slices(int64_t n_vocab) {
  return static_cast<int>((n_vocab + kSlice - 1) / kSlice);
}

}  // namespace

size_t ArgmaxScratchBytes(int64_t n_vocab, int64_t n) {
  return static_cast<size_t>(n * Slices(n_vocab)) * (sizeof(float) + sizeof(int));
}

void LaunchArgmax(const float* logits, int64_t n_vocab, const int32_t* rows,
                  const int32_t* out_index, int64_t n, int32_t* ids, void* scratch,
                  cudaStream_t stream) {
  if (n == 0) return;
  LS_CUDA_REQUIRE(n <= 65535, "cuda argmax: %lld rows", static_cast<long long>(n));
  const int slices = Slices(n_vocab);
  auto* best_v = static_cast<float*>(scratch);
  auto* best_i = reinterpret_cast<int*>(best_v + n * slices);
  SliceArgmaxKernel<<<dim3(slices, static_cast<unsigned>(n)), kThreads, 0, stream>>>(
      logits, n_vocab, rows, slices, best_v, best_i);
  LS_CUDA_LAUNCHED();
  MergeArgmaxKernel<<<static_cast<unsigned>(n), kWarp, 0, stream>>>(best_v, best_i, slices,
                                                                    out_index, ids);
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

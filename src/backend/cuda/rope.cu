// NEOX RoPE: one thread per (row, rotation pair), the angle a pure function of (pos, i)
// evaluated in double like the CPU backend, applied to the pair in every head.
#include "backend/cuda/common.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/rope.h"

namespace lockstep::backend::cuda {
namespace {

__global__ void RopeKernel(float* x, const int32_t* pos, int64_t cols, int head_dim, int n_rot,
                           float base, const float* ff, int64_t n) {
  AwaitPriorKernels();
  const int half = n_rot / 2;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / half;
    const int i = static_cast<int>(t % half);
    float c, s;
    RopeCosSin(pos[r], i, n_rot, base, ff, &c, &s);
    for (int64_t h = 0; h < cols / head_dim; ++h) {
      float* v = x + r * cols + h * head_dim;
      RopeRotate(&v[i], &v[i + half], c, s);
    }
  }
}

}  // namespace

void LaunchRope(float* x, const int32_t* pos, int64_t rows, int64_t cols, int head_dim, int n_rot,
                float base, const float* ff, cudaStream_t stream) {
  LS_CUDA_REQUIRE(head_dim > 0 && cols % head_dim == 0 && n_rot <= head_dim && n_rot % 2 == 0,
                  "cuda rope: head_dim %d, n_rot %d, %lld columns", head_dim, n_rot,
                  static_cast<long long>(cols));
  const int64_t n = rows * (n_rot / 2);
  if (n == 0) return;
  constexpr int kThreads = 256;
  RopeKernel<<<CeilDiv(n, kThreads), kThreads, 0, stream>>>(x, pos, cols, head_dim, n_rot, base, ff,
                                                            n);
  LS_CUDA_LAUNCHED();
}

}  // namespace lockstep::backend::cuda

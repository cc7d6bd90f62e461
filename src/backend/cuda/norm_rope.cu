// Fused per-head RMSNorm + NEOX RoPE: one warp per (row, head) holds the head in registers (lane
// l the values l, l + 32, ...), normalises it exactly as norm.cu's head kernel does (the same fmaf
// chain and butterfly) and rotates each pair (i, i + n_rot/2), both of which sit in one lane when
// n_rot/2 is a multiple of 32, with the angles rope.cu computes (RopeCosSin, once per row and
// block). So the bits are those of the two kernels run one after the other, with one launch and
// one pass over memory.
#include "backend/cuda/common.cuh"
#include "backend/cuda/norm_rope.h"
#include "backend/cuda/rope.cuh"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarp;

// Pairs (v[j], v[j + kHalf]) for j < kHalf rotated, kHalf being the runtime half_slots: one
// uniform branch per candidate keeps every index a constant, so v stays in registers (a
// runtime-indexed pair, or a kDims x kDims compare loop the compiler gives up unrolling, puts v
// in local memory).
template <int kDims, int kHalf = 1>
__device__ __forceinline__ void RotatePairs(float (&v)[kDims], int half_slots, const float* cos_s,
                                            const float* sin_s, int lane) {
  if (half_slots == kHalf) {
#pragma unroll
    for (int j = 0; j < kHalf; ++j)
      RopeRotate(&v[j], &v[j + kHalf], cos_s[lane + kWarp * j], sin_s[lane + kWarp * j]);
  } else if constexpr (2 * kHalf < kDims) {
    RotatePairs<kDims, kHalf + 1>(v, half_slots, cos_s, sin_s, lane);
  }
}

// Block (row, group of kWarpsPerBlock heads); warp w takes head blockIdx.y * kWarpsPerBlock + w.
// The block's threads compute the row's n_rot / 2 angles once, thread t pair t (n_rot / 2 <=
// 256 = kThreads): a lane evaluating its head's 4-8 double-precision angles in turn, in every
// warp, was the kernel's whole cost. The head's loads are issued first so that their latency
// hides behind that chain. Warps past the last head still compute angles and reach the barrier.
template <int kDims>
__global__ void __launch_bounds__(kThreads)
    RmsNormRopeKernel(const float* x, const float* w, float eps, int head_dim, const int32_t* pos,
                      int n_rot, float base, const float* ff, int64_t heads_per_row, float* y) {
  AwaitPriorKernels();
  static_assert(kDims * kWarp / 2 <= kThreads, "one angle per thread");
  __shared__ float cos_s[kDims * kWarp / 2], sin_s[kDims * kWarp / 2];
  const int64_t r = blockIdx.x;
  const int64_t head = static_cast<int64_t>(blockIdx.y) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const bool active = head < heads_per_row;  // uniform over the warp
  const int64_t item = r * heads_per_row + head;
  float v[kDims], wv[kDims];
  if (active) {
    const float* xg = x + item * head_dim;
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int i = lane + kWarp * j;
      v[j] = i < head_dim ? xg[i] : 0.0f;
      wv[j] = w && i < head_dim ? w[i] : 1.0f;
    }
  }
  const int half = n_rot / 2, tid = static_cast<int>(threadIdx.x);
  if (tid < half) RopeCosSin(pos[r], tid, n_rot, base, ff, &cos_s[tid], &sin_s[tid]);
  if (active) {
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kDims; ++j)
      if (lane + kWarp * j < head_dim) ss = fmaf(v[j], v[j], ss);
    ss = WarpSum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(head_dim) + eps);
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      if (lane + kWarp * j >= head_dim) break;
      float t = v[j] * inv;
      if (w) t *= wv[j];
      v[j] = t * 1.0f;  // the norm's extra scale, 1 for a head norm
    }
  }
  __syncthreads();
  if (!active) return;
  // Pair (i, i + n_rot/2) is slots (j, j + half_slots) of the lane; 1 <= half_slots <= kDims / 2.
  RotatePairs<kDims>(v, half / kWarp, cos_s, sin_s, lane);
  float* yg = y + item * head_dim;
#pragma unroll
  for (int j = 0; j < kDims; ++j) {
    const int i = lane + kWarp * j;
    if (i < head_dim) yg[i] = v[j];
  }
}

template <int kDims>
void Launch(const float* x, const float* w, float eps, int head_dim, const int32_t* pos, int n_rot,
            float base, const float* ff, int64_t rows, int64_t cols, float* y,
            cudaStream_t stream) {
  const int64_t heads = cols / head_dim;
  LS_CUDA_REQUIRE(rows <= 0x7fffffff && CeilDiv(heads, kWarpsPerBlock) <= 0xffff,
                  "cuda rms_norm_rope: %lld rows of %lld heads", static_cast<long long>(rows),
                  static_cast<long long>(heads));
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(CeilDiv(heads, kWarpsPerBlock)));
  RmsNormRopeKernel<kDims>
      <<<grid, kThreads, 0, stream>>>(x, w, eps, head_dim, pos, n_rot, base, ff, heads, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool CanFuseNormRope(int head_dim, int n_rot) {
  return head_dim > 0 && head_dim <= 16 * kWarp && n_rot <= head_dim && n_rot > 0 &&
         (n_rot / 2) % kWarp == 0;
}

void LaunchRmsNormRope(const float* x, const float* w, float eps, int head_dim, const int32_t* pos,
                       int n_rot, float base, const float* ff, int64_t rows, int64_t cols, float* y,
                       cudaStream_t stream) {
  LS_CUDA_REQUIRE(CanFuseNormRope(head_dim, n_rot) && cols % head_dim == 0,
                  "cuda rms_norm_rope: head_dim %d, n_rot %d, %lld columns", head_dim, n_rot,
                  static_cast<long long>(cols));
  if (rows == 0) return;
  const int slots = CeilDiv(head_dim, kWarp);
  if (slots <= 4)
    Launch<4>(x, w, eps, head_dim, pos, n_rot, base, ff, rows, cols, y, stream);
  else if (slots <= 8)
    Launch<8>(x, w, eps, head_dim, pos, n_rot, base, ff, rows, cols, y, stream);
  else
    Launch<16>(x, w, eps, head_dim, pos, n_rot, base, ff, rows, cols, y, stream);
}

}  // namespace lockstep::backend::cuda

// The one- and two-row dp4a GEMV of the 256-element formats (Q4_K, Q5_K, Q6_K) with the block's
// activation rows in shared memory: copied once per block of 8 columns (cp.async, every thread),
// swizzled so that each quarter warp's 16-byte loads hit 8 different bank quads, instead of every
// warp reading each activation block from L1 with 4 lanes 64 bytes apart (the register kernel's
// loads touch two lines per group, and its L1 ran at 85% of peak with DRAM at 74%). The weights
// still come into registers stripe by stripe, and the column arithmetic is int_gemv.cuh's (group
// g's blocks g, g + 8, ... in ascending order, the Acc8 tree): the register kernel's bits.
#pragma once

#include <cstdint>

#include "backend/cuda/int_gemv.cuh"

namespace lockstep::backend::cuda::intmm {

// cp.async of 16 and 4 bytes (sm_80 and later; the staged kernel is launched only there).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
  (void)dst, (void)src;
  __trap();
#endif
}
__device__ __forceinline__ void CopyAsync4(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
#else
  (void)dst, (void)src;
  __trap();
#endif
}
__device__ __forceinline__ void CommitAsync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void WaitAsync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Shared-memory bytes of R staged activation rows of k values: levels, 16-level sums, scales.
constexpr int64_t StagedActBytes(int R, int64_t k) {
  return R * k + R * k / 8 + R * k / 64;
}

// R activation rows staged by IssueActivations (row r of the dot is staged row r).
template <class F>
struct SharedRows {
  const int8_t* q;
  const int16_t* bsum;
  const float* d;
  int64_t k;
  __device__ intq::SharedLevels<F::kSwizzle> Levels(int r, int64_t b) const {
    return {reinterpret_cast<const int4*>(q + r * k + b * 256), static_cast<int>(b & 1)};
  }
  __device__ const int16_t* Bsum(int r, int64_t b) const { return bsum + r * (k / 16) + b * 16; }
  __device__ float Scale(int r, int64_t b) const { return d[r * (k / 256) + b]; }
};

// Starts the copy (one commit group, every thread of the block) of activation rows r0 ..
// r0 + nr - 1 into `sm`: levels unit by unit into their swizzled places, sums and scales as
// they are.
template <class F, int R>
__device__ SharedRows<F> IssueActivations(const ActRows& x, int64_t r0, int nr, uint8_t* sm) {
  const int k = static_cast<int>(x.k), units = k / 16;
  auto* q = reinterpret_cast<int8_t*>(sm);
  auto* bsum = reinterpret_cast<int16_t*>(sm + R * k);
  auto* d = reinterpret_cast<float*>(sm + R * k + R * k / 8);
  for (int i = threadIdx.x; i < nr * units; i += blockDim.x) {
    const int u = i % units, b = u / 16;
    const int at = i - u + 16 * b + intq::SwizzledUnit<F::kSwizzle>(u % 16, b & 1);
    CopyAsync16(q + 16 * at, x.q + r0 * k + 16 * static_cast<int64_t>(i));
  }
  for (int i = threadIdx.x; i < nr * k / 128; i += blockDim.x)
    CopyAsync16(bsum + 8 * i, x.bsum + r0 * (k / 16) + 8 * i);
  for (int i = threadIdx.x; i < nr * k / 256; i += blockDim.x)
    CopyAsync4(d + i, x.d + r0 * (k / 256) + i);
  CommitAsync();
  return {q, bsum, d, x.k};
}

template <class F, int R>
__device__ __forceinline__ void StoreColumn(const float* acc, int64_t col, int64_t n_out,
                                            int64_t r0, int nr, float* __restrict__ y) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = Acc8Tree(acc[r]);
    if (threadIdx.x % kWarp == 0 && r < nr) y[(r0 + r) * n_out + col] = s;
  }
}

// Activations in shared memory, weights loaded into registers stripe by stripe as DotColumn.
template <class F, int R>
__global__ void __launch_bounds__(kColsPerBlock* kWarp, 3)
    StagedActKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                    ActRows x, int64_t rows, float* __restrict__ y) {
  extern __shared__ int4 smem[];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x / kWarp;
  const bool live = col < n_out;
  if (live) PrefetchStripe<F, R>(w + col * row_bytes, nblk);
  AwaitPriorKernels();
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), rows - r0));
  const SharedRows<F> xs = IssueActivations<F, R>(x, r0, nr, reinterpret_cast<uint8_t*>(smem));
  constexpr int U = StripeUnroll<F, R>();
  const int64_t n = live ? nblk : 0;  // every warp reaches the barrier
  const uint8_t* wrow = w + (live ? col : 0) * row_bytes;
  float acc[R] = {};
  typename F::Raw raw[U];
  LoadStripe<F, U>(wrow, n, 0, raw);
  WaitAsync<0>();
  __syncthreads();
  FoldStripe<F, R, U>(raw, 0, n, xs, nr, acc);
  for (int64_t b0 = 8 * U; b0 < n; b0 += 8 * U) {
    LoadStripe<F, U>(wrow, n, b0, raw);
    FoldStripe<F, R, U>(raw, b0, n, xs, nr, acc);
  }
  if (live) StoreColumn<F, R>(acc, col, n_out, r0, nr, y);
}

}  // namespace lockstep::backend::cuda::intmm

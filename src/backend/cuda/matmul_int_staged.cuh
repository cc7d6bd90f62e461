// The one- and two-row dp4a GEMV of the 256-element formats (Q4_K, Q5_K, Q6_K) with its inputs in
// shared memory. The column arithmetic is int_gemv.cuh's (group g's blocks g, g + 8, ... in
// ascending order, the Acc8 tree), so the outputs are the register kernel's bits; only where the
// bytes wait differs:
// - the block's activation rows are copied once into shared memory (cp.async, swizzled so each
//   quarter warp's loads hit 8 bank quads) instead of each warp reading them from L1 per block;
// - "streamed": each warp's weight rows also come through shared memory, in stages of 16 blocks
//   copied by 16-byte cp.async pieces over the whole warp (every load a full line's share), 3
//   stages in flight, the first ones issued before the kernel waits for its inputs (the weights
//   are no kernel's output) and holding no registers while they fly; a warp takes C columns one
//   after another, so the copy of the next column runs under the current one's dots.
#pragma once

#include <cstdint>

#include "backend/cuda/int_gemv.cuh"

namespace lockstep::backend::cuda::intmm {

// cp.async with zero fill: `bytes` (0..16) are copied from src, the rest of the 16 written as
// zeros (0 copies nothing).
__device__ __forceinline__ void CopyAsyncPart16(void* dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
#else
  (void)dst, (void)src, (void)bytes;
  __trap();  // the staged kernels are launched from sm_80 on
#endif
}
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
  CopyAsyncPart16(dst, src, valid ? 16 : 0);
}
__device__ __forceinline__ void CopyAsync4(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
#else
  (void)dst, (void)src, (void)valid;
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
// (A multiple of 16: the weight stages follow.)
constexpr int64_t StagedActBytes(int R, int64_t k) {
  return (R * k + R * k / 8 + R * k / 64 + 15) / 16 * 16;
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
    CopyAsync16(q + 16 * at, x.q + r0 * k + 16 * static_cast<int64_t>(i), true);
  }
  for (int i = threadIdx.x; i < nr * k / 128; i += blockDim.x)
    CopyAsync16(bsum + 8 * i, x.bsum + r0 * (k / 16) + 8 * i, true);
  for (int i = threadIdx.x; i < nr * k / 256; i += blockDim.x)
    CopyAsync4(d + i, x.d + r0 * (k / 256) + i, true);
  CommitAsync();
  return {q, bsum, d, x.k};
}

template <class F, int R>
__device__ __forceinline__ void StoreColumn(float* acc, int64_t col, int64_t n_out, int64_t r0,
                                            int nr, float* __restrict__ y) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = Acc8Tree(acc[r]);
    if (threadIdx.x % kWarp == 0 && r < nr && col < n_out) y[(r0 + r) * n_out + col] = s;
    acc[r] = 0.0f;
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

inline constexpr int kStageBlocks = 16;  // U = 2 blocks per group
inline constexpr int kStages = 3;

// A stage holds 16 blocks from the 16-byte boundary at or below the first one.
template <class F>
constexpr int StageBytes() {
  return (kStageBlocks * F::kBytes + 16 + 15) / 16 * 16;
}

template <class F, int R>
constexpr int64_t StreamedBytes(int64_t k) {
  return StagedActBytes(R, k) + int64_t{kColsPerBlock} * kStages * StageBytes<F>();
}

// Starts the copy of blocks [b0, b0 + 16) of a weight row (those below nblk) into `stage`, in
// 16-byte pieces over the warp's lanes; a piece past `end` (the weight's last byte) is cut short
// there. Block b0 + j lands at stage + (its address & 15) + j * kBytes.
template <class F>
__device__ __forceinline__ void IssueStage(uint8_t* stage, const uint8_t* wrow, int64_t nblk,
                                           int64_t b0, const uint8_t* end) {
  const uint8_t* first = wrow + b0 * F::kBytes;
  const uint8_t* last = wrow + min(nblk, b0 + kStageBlocks) * F::kBytes;
  const uint8_t* base = first - (reinterpret_cast<uintptr_t>(first) & 15);
  const int pieces = static_cast<int>((last - base + 15) / 16);
  for (int i = threadIdx.x % kWarp; i < pieces; i += kWarp) {
    const int64_t left = end - (base + 16 * i);
    CopyAsyncPart16(stage + 16 * i, base + 16 * i, left >= 16 ? 16 : static_cast<int>(left));
  }
}

template <class F, int R>
__device__ __forceinline__ void FoldStage(const uint8_t* stage, int64_t b0, int64_t nblk,
                                          const SharedRows<F>& xs, int nr, float* acc) {
  constexpr int U = kStageBlocks / 8;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  typename F::Raw raw[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    raw[u] = {};
    if (b0 + 8 * u + g < nblk) F::LoadRaw(stage + (8 * u + g) * F::kBytes, t, raw[u]);
  }
  FoldStripe<F, R, U>(raw, b0, nblk, xs, nr, acc);
}

// Warp w of block i takes columns (8 i + w) C .. + C - 1; its stripes (column c, stage s) run
// in order through a ring of kStages stages.
template <class F, int R, int C>
__global__ void __launch_bounds__(kColsPerBlock* kWarp, R == 1 ? 3 : 2)
    StreamedKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                   ActRows x, int64_t rows, float* __restrict__ y) {
  extern __shared__ int4 smem[];
  auto* sm = reinterpret_cast<uint8_t*>(smem);
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x / kWarp) * C;
  uint8_t* ring = sm + StagedActBytes(R, x.k) + (threadIdx.x / kWarp) * kStages * StageBytes<F>();
  const int64_t ns = (nblk + kStageBlocks - 1) / kStageBlocks, total = C * ns;
  const uint8_t* end = w + n_out * row_bytes;
  const auto issue = [&](int64_t i) {
    const int64_t col = col0 + i / ns;
    if (i < total && col < n_out)
      IssueStage<F>(ring + (i % kStages) * StageBytes<F>(), w + col * row_bytes, nblk,
                    (i % ns) * kStageBlocks, end);
    CommitAsync();  // empty groups too: every thread counts the same groups
  };
  for (int i = 0; i < kStages; ++i) issue(i);
  AwaitPriorKernels();
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), rows - r0));
  const SharedRows<F> xs = IssueActivations<F, R>(x, r0, nr, sm);
  WaitAsync<0>();
  __syncthreads();
  float acc[R] = {};
  for (int64_t i = 0; i < total; ++i) {
    const int64_t col = col0 + i / ns, b0 = (i % ns) * kStageBlocks;
    WaitAsync<kStages - 1>();  // stage i (later ones may still fly)
    __syncwarp();
    const int off = static_cast<int>(
        reinterpret_cast<uintptr_t>(w + min(col, n_out - 1) * row_bytes + b0 * F::kBytes) & 15);
    FoldStage<F, R>(ring + (i % kStages) * StageBytes<F>() + off, b0, col < n_out ? nblk : 0, xs,
                    nr, acc);
    __syncwarp();  // every lane is done with the stage before it is refilled
    issue(i + kStages);
    if (b0 + kStageBlocks >= nblk) StoreColumn<F, R>(acc, col, n_out, r0, nr, y);
  }
}

}  // namespace lockstep::backend::cuda::intmm

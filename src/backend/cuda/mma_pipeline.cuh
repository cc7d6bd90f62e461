// The copy pipeline and MMA primitives of the raw-block tensor-core kernels (matmul_mma_k4.cu for
// Q4_K / Q5_K, matmul_mma_q6k.cu for Q6_K): raw weight blocks and quantized activation rows
// stream into shared memory through a 3-stage cp.async pipeline (the copy of step s + 2 runs
// under the MMAs of step s), steps taking the blocks partial by partial in the order the Acc8 tree
// finishes them, and fragments read with ldmatrix.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/mma_common.cuh"

namespace lockstep::backend::cuda::pipe {

inline constexpr int kCols = 64;  // weight rows (outputs) per block: 16 per warp
inline constexpr int kWarps = kCols / 16;
inline constexpr int kThreads = kWarps * kWarp;
inline constexpr int kStages = 3;
inline constexpr int kXStride = 256 + 16;  // bytes per staged activation row: conflict-free
// Blocks a multiprocessor holds of each raw-block kernel: its __launch_bounds__, and the split
// launches' wave count (matmul_mma.cu). 3 (168 registers; two with no register cap ran 31B
// prefill 9% slower, and 16-row tiles at four blocks of 128 registers 15% slower, sessions
// 17-18, H100).
inline constexpr int kMinBlocks = 3;

// One 256-element block of every column and row of the tile: kWBytes bytes of each weight row
// (the raw block, or a 16-byte aligned window around it), the activation rows' levels and scales.
template <int kWBytes, int R>
struct alignas(16) Stage {
  uint8_t w[kCols][kWBytes];
  int8_t x[R][kXStride];
  float xd[R];
};
template <int kWBytes, int R>
struct Smem {
  Stage<kWBytes, R> stage[kStages];
  int64_t x_row[R], y_row[R];
};

// cp.async of `bytes` (0 to 16) from 16-byte aligned src, the rest of the 16 zero-filled.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
#else
  __trap();  // the raw-block kernels are only launched on sm_80 and later
#endif
}
// cp.async with zero fill: `valid` false copies nothing and writes zeros.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
  CopyAsync16(dst, src, valid ? 16 : 0);
}
__device__ __forceinline__ void CopyAsync4(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));
#else
  __trap();
#endif
}
__device__ __forceinline__ void CommitAsync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void WaitAsync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// c = A B, m16n8k32, int8 (a: rows g8 | g8 + 8 at k 4 tig .. | k 16 + 4 tig ..).
__device__ __forceinline__ void Mma32(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                      int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0),
        "r"(0));
#else
  __trap();
#endif
}
// c += A B (the accumulator carried from MMA to MMA).
__device__ __forceinline__ void MmaAcc32(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                         int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}
// c = A B, m16n8k16, int8 (a: rows g8 | g8 + 8 at k 4 tig ..; b: k 4 tig .. of column g8).
__device__ __forceinline__ void Mma16(uint32_t a0, uint32_t a1, uint32_t b, int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%8,%9,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(0), "r"(0), "r"(0), "r"(0));
#else
  __trap();
#endif
}

// Four 8x8 matrices of 16-byte rows from shared memory (ldmatrix): lanes 8 m .. 8 m + 7 give
// the rows of matrix m, and lane l receives word l % 4 of row l / 4 of each: the A or B fragment
// word of an m16n8k32 MMA whose k range is the 16 bytes of a row.
__device__ __forceinline__ void LoadMatrices(uint32_t addr, uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  __trap();
#endif
}

__device__ __forceinline__ uint32_t SharedAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Starts the copy of block b of the tile's activation rows (levels and scale) into `st`.
template <int kWBytes, int R>
__device__ __forceinline__ void IssueActivations(Stage<kWBytes, R>& st, const ActRows& x,
                                                 const int64_t* x_row, int64_t b) {
  for (int i = threadIdx.x; i < R * 16; i += kThreads) {
    const int r = i / 16, piece = i % 16;
    const int64_t row = x_row[r];
    CopyAsync16(&st.x[r][16 * piece], row >= 0 ? x.q + row * x.k + b * 256 + 16 * piece : x.q,
                row >= 0);
  }
  const int t = threadIdx.x;
  if (t < R) {
    const int64_t row = x_row[t];
    CopyAsync4(&st.xd[t], row >= 0 ? x.d + row * (x.k / 256) + b : x.d, row >= 0);
  }
}

// B fragments of the tile's R / 8 column tiles for the 32 activation elements at byte offset
// k0 of the staged rows (b[nt][0]: k 0-15, b[nt][1]: k 16-31); b_addr is the lane's ldmatrix
// row, BAddr.
template <int R>
__device__ __forceinline__ void LoadB(uint32_t b_addr, int k0, uint32_t (&b)[R / 8][2]) {
#pragma unroll
  for (int qq = 0; qq < R / 16; ++qq) {
    uint32_t r[4];
    LoadMatrices(b_addr + 16 * kXStride * qq + k0, r);
    b[2 * qq][0] = r[0], b[2 * qq][1] = r[1], b[2 * qq + 1][0] = r[2], b[2 * qq + 1][1] = r[3];
  }
}
// The lane's ldmatrix row for LoadB: matrices (k bytes 0-15 | 16-31) x (tile rows 8 nt .. +7)
// for nt = 2 q + m / 2.
template <int kWBytes, int R>
__device__ __forceinline__ uint32_t BAddr(const Stage<kWBytes, R>& st, int lane) {
  const int m = lane / 8, i8 = lane % 8;
  return SharedAddr(&st.x[8 * (m >> 1) + i8][16 * (m & 1)]);
}

// The partials a block runs: all of them, or one half of a launch split in two (TreeAcc's
// EndFirstHalf, FinishSecondHalf): positions [i0, i1) of PartialAt's order, which are steps
// [first_step, end_step) of ScheduledBlock's.
struct PartialRange {
  int i0 = 0, i1 = 8;
  int64_t first_step = 0, end_step = 0;
  bool second_half = false;
};
// Half `half` (0 or 1) of a launch split in `split` (1 or 2) parts.
__device__ __forceinline__ PartialRange RangeOf(int64_t nblk, int split, int half) {
  PartialRange r;
  r.end_step = nblk;
  if (split == 1) return r;
  int64_t first_half_steps = 0;
  for (int i = 0; i < 4; ++i) first_half_steps += PartialBlocks(nblk, PartialAt(i));
  if (half == 0) {
    r.i1 = 4, r.end_step = first_half_steps;
  } else {
    r.i0 = 4, r.first_step = first_half_steps, r.second_half = true;
  }
  return r;
}

// The pipelined K loop of one tile: issue(s, slot) starts the copies of step s into stage
// `slot`, compute(slot, b, acc) adds block b's contributions from stage `slot` to acc; the
// range's partials (all of them unless kSplit: a launch that may split keeps the range's
// bounds in registers, which cost the unsplit kernel 40-100 bytes of spills) end in `tree` in
// PartialAt order, as Acc8 ends them.
template <int R, bool kSplit, class Issue, class Compute>
__device__ __forceinline__ void RunPartials(int64_t nblk, PartialRange range,
                                            TreeAcc (&tree)[R / 8][4], Issue issue,
                                            Compute compute) {
  if constexpr (!kSplit) range = PartialRange{0, 8, 0, nblk, false};
  const auto issue_step = [&](int64_t s, int slot) {
    if (s < range.end_step) issue(s, slot);
  };
  int64_t step = range.first_step;
  for (int i = 0; i < kStages - 1; ++i) {
    issue_step(step + i, i);
    CommitAsync();
  }
  int64_t local = 0;  // steps of this range done
  for (int i = range.i0; i < range.i1; ++i) {
    const int p = PartialAt(i);
    float acc[R / 8][4] = {};
    for (int64_t b = p; b < nblk; b += 8, ++local) {
      WaitAsync<kStages - 2>();  // block b has landed (this thread's copies) ...
      __syncthreads();           // ... everyone's, and the stage refilled below is free
      issue_step(step + local + kStages - 1, static_cast<int>((local + kStages - 1) % kStages));
      CommitAsync();
      compute(static_cast<int>(local % kStages), b, acc);
    }
    if (range.second_half && p == 7) {
#pragma unroll
      for (int nt = 0; nt < R / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) tree[nt][e].FinishSecondHalf(acc[nt][e]);
    } else {
      FinishPartial(tree, p, acc);
    }
  }
  if (range.i1 == 4)
#pragma unroll
    for (int nt = 0; nt < R / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) tree[nt][e].EndFirstHalf();
}

}  // namespace lockstep::backend::cuda::pipe

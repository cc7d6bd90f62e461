// The integer path's tensor-core kernel for Q6_K (the v and half the down projections of a
// Q4_K_M file, and the LM head), on the raw-block pipeline of mma_pipeline.cuh. A Q6_K block is
// 210 bytes, so blocks start 2-byte aligned: each weight row's block is copied as the 16-byte
// aligned window around it (14 pieces, the bytes past the block's end not read) and its words are
// cut from that window with a funnel shift. A level q (0..63) becomes the byte (q ^ 32) << 2, which
// as int8 is 4 (q - 32): two int8 m16n8k16 MMAs per 32-element sub-block give each 16-element
// group's sum times 4, exact, the group's int8 scale is applied in integers and the block's sum
// divided by 4 (exact) is quant::DotRow's integer. Its float contribution and its place in the
// Acc8 tree are quant::DotRow's, so every output is the CPU's bits whatever the tile or the
// number of rows.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/matmul_mma_raw.h"
#include "backend/cuda/mma_pipeline.cuh"

namespace lockstep::backend::cuda {
namespace {

using pipe::kCols;
using pipe::kThreads;

constexpr int kBlockBytes = 210;  // ql[128] (low 4 bits), qh[64] (high 2), scales[16], d (fp16)
constexpr int kQh = 128, kScales = 192, kD = 208;
constexpr int kPieces = 14;   // 16-byte pieces of a window: offset (<= 14) + 210 <= 224
constexpr int kWindow = 240;  // bytes a staged weight row: rows 60 words apart, 8 in 8 bank quads
constexpr int kRows = kMmaTileRows;
using pipe::kMinBlocks;  // 71 KB of shared memory and 168 registers (no spills) a block
using Stage = pipe::Stage<kWindow, kRows>;
using Smem = pipe::Smem<kWindow, kRows>;

// Starts the copy of block b of every column (its window) and row of the tile into `st`.
__device__ void IssueStep(Stage& st, const uint8_t* __restrict__ w, int64_t row_bytes,
                          int64_t n_out, int64_t col0, const ActRows& x, const int64_t* x_row,
                          int64_t b) {
  for (int i = threadIdx.x; i < kCols * kPieces; i += kThreads) {
    const int c = i / kPieces, piece = i % kPieces;
    const uint8_t* blk = w + (col0 + c) * row_bytes + b * kBlockBytes;
    const auto* src = reinterpret_cast<const uint8_t*>(
        (reinterpret_cast<uintptr_t>(blk) & ~uintptr_t{15}) + 16 * piece);
    // The window's first piece may begin in the block before (never before the tensor, whose
    // allocation is 256-byte aligned); its last ends at the block's end.
    const int64_t left = blk + kBlockBytes - src;
    const bool ok = col0 + c < n_out && left > 0;
    pipe::CopyAsync16(&st.w[c][16 * piece], ok ? src : reinterpret_cast<const uint8_t*>(x.q),
                      ok ? static_cast<int>(left < 16 ? left : 16) : 0);
  }
  pipe::IssueActivations(st, x, x_row, b);
}

// A staged block of one weight row: the 4-byte-aligned words of its window and the shift that
// cuts the block's words from them.
struct Window {
  const uint32_t* words;  // the window's word holding the block's first byte
  uint32_t shift;         // 0 or 16: the block starts 0 or 2 bytes into that word
  __device__ Window(const uint8_t* row, int start)
      : words(reinterpret_cast<const uint32_t*>(row + (start & 12))), shift((start & 2) * 8) {}
  // Bytes [off, off + 4) of the block (off a multiple of 4).
  __device__ uint32_t At(int off) const {
    return __funnelshift_r(words[off / 4], words[off / 4 + 1], shift);
  }
};

// Four levels of sub-block k (0..3) of a half as int8 4 (q - 32): low bits from the ql word's
// nibble k / 2, high bits from the qh word's bits 2 k, 2 k + 1.
__device__ __forceinline__ uint32_t Levels4(uint32_t ql, uint32_t qh, int k) {
  const uint32_t lo = (k < 2 ? ql << 2 : ql >> 2) & 0x3C3C3C3Cu;
  const uint32_t hi = (qh << (6 - 2 * k)) & 0xC0C0C0C0u;
  return (lo | hi) ^ 0x80808080u;
}

__device__ __forceinline__ int SignedByte(uint32_t w, int i) {
  return static_cast<int8_t>(intq::ByteOf(w, i));
}

// Block b's float contributions added to acc: element e of column tile nt is weight row
// 16 warp + g8 + 8 (e / 2) and activation row 8 nt + 2 tig + e % 2. row_start[h]: the low 4
// address bits of the thread's weight rows g8 + 8 h.
__device__ __forceinline__ void ComputeStep(const Stage& st, int warp, int lane, int64_t b,
                                            const int (&row_start)[2], float (&acc)[kRows / 8][4]) {
  constexpr int kNt = kRows / 8;
  const int g8 = lane / 4, tig = lane % 4;
  const Window win[2] = {
      Window(st.w[16 * warp + g8], (row_start[0] + 2 * static_cast<int>(b)) & 15),
      Window(st.w[16 * warp + g8 + 8], (row_start[1] + 2 * static_cast<int>(b)) & 15)};
  const uint32_t b_addr = pipe::BAddr(st, lane);
  int isum4[kNt][4] = {};  // 4 times the block's integer sums
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint32_t sc[2][2];  // [h][word]: scale bytes of groups 8 half + 4 word .. + 3
    uint32_t qh[2][2];  // [h][k half]: qh bytes 32 half + 16 kh + 4 tig
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        sc[h][kh] = win[h].At(kScales + 8 * half + 4 * kh);
        qh[h][kh] = win[h].At(kQh + 32 * half + 16 * kh + 4 * tig);
      }
#pragma unroll
    for (int odd = 0; odd < 2; ++odd) {
      uint32_t ql[2][2];  // [h][k half]: ql bytes 64 half + 32 odd + 16 kh + 4 tig
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int kh = 0; kh < 2; ++kh)
          ql[h][kh] = win[h].At(64 * half + 32 * odd + 16 * kh + 4 * tig);
#pragma unroll
      for (int nib = 0; nib < 2; ++nib) {
        const int k = odd + 2 * nib, j = 4 * half + k;  // sub-block of the half, of the block
        uint32_t bf[kNt][2];
        pipe::LoadB<kRows>(b_addr, 32 * j, bf);
#pragma unroll
        for (int kh = 0; kh < 2; ++kh) {  // group 2 j + kh: scale byte 2 k + kh of the half
          const uint32_t a0 = Levels4(ql[0][kh], qh[0][kh], k);
          const uint32_t a1 = Levels4(ql[1][kh], qh[1][kh], k);
          const int s0 = SignedByte(sc[0][k / 2], 2 * (k % 2) + kh);
          const int s1 = SignedByte(sc[1][k / 2], 2 * (k % 2) + kh);
#pragma unroll
          for (int nt = 0; nt < kNt; ++nt) {
            int c[4];
            pipe::Mma16(a0, a1, bf[nt][kh], c);
            isum4[nt][0] += s0 * c[0], isum4[nt][1] += s0 * c[1];
            isum4[nt][2] += s1 * c[2], isum4[nt][3] += s1 * c[3];
          }
        }
      }
    }
  }
  const float d[2] = {intq::Half(win[0].At(kD)), intq::Half(win[1].At(kD))};
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float dx = st.xd[8 * nt + 2 * tig + e % 2];
      acc[nt][e] = __fadd_rn(acc[nt][e], intq::Combine(d[e / 2], dx, isum4[nt][e] >> 2));
    }
}

template <bool kSplit>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    IntMmaQ6KKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                    ActRows x, MmaRows map, float* __restrict__ y, float* __restrict__ y2) {
  AwaitPriorKernels();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g8 = lane / 4, tig = lane % 4;
  // Row tiles vary fastest over the grid, so the blocks reading one column tile's weights run
  // together and the weights come from DRAM once.
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kCols;
  w = TileRows(map, blockIdx.x, row_bytes, w, sm.x_row, sm.y_row);
  if (!w) return;  // the whole block: an unused entry of the tile table
  __syncthreads();
  int row_start[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t col = col0 + 16 * warp + g8 + 8 * h;
    row_start[h] = static_cast<int>(reinterpret_cast<uintptr_t>(w + col * row_bytes) & 15);
  }
  const auto issue = [&](int64_t s, int slot) {
    if (s >= nblk) return;
    const int64_t b = ScheduledBlock(nblk, s);
    IssueStep(sm.stage[slot], w, row_bytes, n_out, col0, x, sm.x_row, b);
  };
  TreeAcc tree[kRows / 8][4];
  const pipe::PartialRange range =
      kSplit ? pipe::RangeOf(nblk, 2, blockIdx.z) : pipe::PartialRange{};
  pipe::RunPartials<kRows, kSplit>(nblk, range, tree, issue,
                                   [&](int slot, int64_t b, float(&acc)[kRows / 8][4]) {
                                     ComputeStep(sm.stage[slot], warp, lane, b, row_start, acc);
                                   });
  // A split launch: the first half its half total into y, the second into y2 (the caller adds).
  StoreTile(tree, col0, warp, g8, tig, sm.y_row, n_out, blockIdx.z == 0 ? y : y2);
}

}  // namespace

bool LaunchIntMmaQ6K(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const ActRows& x, const MmaRows& map, unsigned tiles, float* y, float* y2,
                     cudaStream_t stream) {
  if (type != DType::Q6_K) return false;
  dim3 grid = MmaGrid(tiles, n_out, kCols);
  grid.z = y2 ? 2 : 1;
  constexpr size_t kSmem = sizeof(Smem);
  static_assert(kSmem * kMinBlocks <= 228 * 1024 - 1024 * kMinBlocks,
                "the blocks a multiprocessor is to hold do not fit its shared memory");
  auto* kernel = y2 ? IntMmaQ6KKernel<true> : IntMmaQ6KKernel<false>;
  // Set on every launch (cheap): one process may drive several devices.
  LS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmem)));
  kernel<<<grid, kThreads, kSmem, stream>>>(static_cast<const uint8_t*>(w), row_bytes, k / 256,
                                            n_out, x, map, y, y2);
  LS_CUDA_LAUNCHED();
  return true;
}

}  // namespace lockstep::backend::cuda

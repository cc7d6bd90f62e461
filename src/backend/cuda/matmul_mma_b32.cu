// The integer path's tensor-core kernel for the 32-element formats (Q8_0, Q5_0, Q4_0: the
// fallbacks of a Q4_K_M file for rows that are not a multiple of 256, such as 26B-A4B's 704-wide
// expert and 2,112-wide dense down projections) on a copy pipeline like mma_pipeline.cuh's: the
// raw blocks of step s + 2 stream into shared memory (cp.async, a 16-byte aligned window around
// each block) while step s runs. A step is 4 blocks of the row in the order the Acc8 partials
// finish them (ScheduledBlock); its windows are decoded to int8 levels in shared memory, read
// with ldmatrix, and one m16n8k32 MMA gives each block's exact integer dot. Each block's float
// contribution and each partial's place in the tree are quant::DotRow's (Combine, Acc8),
// so every output is the CPU's bits whatever the tile or the number of rows.
#include "backend/cuda/matmul_mma_raw.h"

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/mma_pipeline.cuh"

namespace lockstep::backend::cuda {
namespace {

using pipe::kCols;
using pipe::kStages;
using pipe::kThreads;
constexpr int kRows = kMmaTileRows;  // activation rows per tile
constexpr int kNt = kRows / 8;       // MMA column tiles of 8 rows
constexpr int kStepBlocks = 4;       // 32-element blocks a step
// A block starts at an even address (its row and its offset in the row are even), so a window
// of three 16-byte pieces holds any 34- or 22-byte block and two pieces an 18-byte one.
constexpr int kWindow = 48;
constexpr int kStride = 32 * kStepBlocks + 16;  // bytes a staged row: conflict-free ldmatrix

struct alignas(16) Stage {
  uint8_t w[kCols][kStepBlocks][kWindow];  // raw block windows
  int8_t x[kRows][kStride];                // activation levels, block s at byte 32 s
  float xd[kRows][kStepBlocks];            // activation scales
};
struct Smem {
  Stage stage[kStages];
  int8_t levels[kCols][kStride];    // the step's weight levels, decoded from the windows
  float wd[kCols][kStepBlocks];     // the step's weight scales
  int16_t schedule[kMaxB32Blocks];  // ScheduledBlock(nblk, f) for f < nblk
  int64_t x_row[kRows], y_row[kRows];
};

__device__ __forceinline__ const uint8_t* WindowOf(const uint8_t* block) {
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(block) & ~uintptr_t{15});
}

// The block's weight rows: which (column, schedule position) pairs hold a block, and where.
struct WeightTile {
  const uint8_t* w;
  int64_t row_bytes, nblk, n_out, col0;
  __device__ bool Has(int c, int64_t f) const { return col0 + c < n_out && f < nblk; }
  // Column c's block at schedule position f where Has(c, f); elsewhere w (never read: the copy
  // is zero-filled).
  template <class F>
  __device__ const uint8_t* Block(const Smem& sm, int c, int64_t f) const {
    return Has(c, f) ? w + (col0 + c) * row_bytes + sm.schedule[f] * F::kBytes : w;
  }
};

// Starts the copies of the blocks at schedule positions f0 .. f0 + 3 of every column and row of
// the tile into `st` (positions past nblk copy nothing and leave zeros).
template <class F>
__device__ void IssueStep(Stage& st, const Smem& sm, const WeightTile& wt, const ActRows& x,
                          int64_t f0) {
  const int64_t nblk = wt.nblk;
  constexpr int kPieces = F::kBytes <= 18 ? 2 : 3;
  for (int i = threadIdx.x; i < kCols * kStepBlocks * kPieces; i += kThreads) {
    const int piece = i % kPieces, s = (i / kPieces) % kStepBlocks, c = i / (kPieces * kStepBlocks);
    pipe::CopyAsync16(&st.w[c][s][16 * piece], WindowOf(wt.Block<F>(sm, c, f0 + s)) + 16 * piece,
                      wt.Has(c, f0 + s));
  }
  for (int i = threadIdx.x; i < kRows * kStepBlocks * 2; i += kThreads) {
    const int half = i % 2, s = (i / 2) % kStepBlocks, r = i / (2 * kStepBlocks);
    const int64_t row = sm.x_row[r];
    const bool ok = row >= 0 && f0 + s < nblk;
    const int8_t* src = ok ? x.q + row * x.k + sm.schedule[f0 + s] * 32 + 16 * half : x.q;
    pipe::CopyAsync16(&st.x[r][32 * s + 16 * half], src, ok);
  }
  for (int i = threadIdx.x; i < kRows * kStepBlocks; i += kThreads) {
    const int s = i % kStepBlocks, r = i / kStepBlocks;
    const int64_t row = sm.x_row[r];
    const bool ok = row >= 0 && f0 + s < nblk;
    pipe::CopyAsync4(&st.xd[r][s], ok ? x.d + row * (x.k / 32) + sm.schedule[f0 + s] : x.d, ok);
  }
}

// The step's weight windows to int8 levels and scales (columns or positions without a block
// give zero scales: their outputs are never stored or their blocks never added).
template <class F>
__device__ void DecodeStep(const Stage& st, Smem& sm, const WeightTile& wt, int64_t f0) {
  for (int i = threadIdx.x; i < kCols * kStepBlocks; i += kThreads) {
    const int s = i % kStepBlocks, c = i / kStepBlocks;
    const bool ok = wt.Has(c, f0 + s);
    const uint8_t* block = wt.Block<F>(sm, c, f0 + s);  // w itself (even) where none: zeros
    const uint8_t* raw = &st.w[c][s][reinterpret_cast<uintptr_t>(block) & 15];
    uint32_t lv[8];
    int sc[2];
    F::Levels32(raw, lv, sc);  // group scales: 1 in these formats
    uint4* dst = reinterpret_cast<uint4*>(&sm.levels[c][32 * s]);
    dst[0] = make_uint4(lv[0], lv[1], lv[2], lv[3]);
    dst[1] = make_uint4(lv[4], lv[5], lv[6], lv[7]);
    sm.wd[c][s] = ok ? F::Scale(raw) : 0.0f;
  }
}

__device__ __forceinline__ void ZeroAcc(float (&acc)[kNt][4]) {
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
}

// Adds block s of the step (its exact integer dot times the two scales) to acc: element e of
// column tile nt is weight row 16 warp + g8 + 8 (e / 2) and tile row 8 nt + 2 tig + e % 2.
__device__ __forceinline__ void AddBlock(const Stage& st, const Smem& sm, int warp, int lane, int s,
                                         float (&acc)[kNt][4]) {
  const int g8 = lane / 4, tig = lane % 4, m = lane / 8, i8 = lane % 8;
  // A: (weight rows 0-7 | 8-15) x (k bytes 0-15 | 16-31); B: (k bytes 0-15 | 16-31) x (tile
  // rows 8 nt .. + 7) for nt = 2 q + m / 2.
  uint32_t a[4];
  pipe::LoadMatrices(
      pipe::SharedAddr(&sm.levels[16 * warp + 8 * (m & 1) + i8][16 * (m >> 1)]) + 32 * s, a);
  const uint32_t b_addr = pipe::SharedAddr(&st.x[8 * (m >> 1) + i8][16 * (m & 1)]) + 32 * s;
  const float dw[2] = {sm.wd[16 * warp + g8][s], sm.wd[16 * warp + g8 + 8][s]};
#pragma unroll
  for (int q = 0; q < kNt / 2; ++q) {
    uint32_t b[4];
    pipe::LoadMatrices(b_addr + 16 * kStride * q, b);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int nt = 2 * q + h;
      int c[4];
      pipe::Mma32(a, b[2 * h], b[2 * h + 1], c);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[nt][e] = __fadd_rn(acc[nt][e],
                               intq::Combine(dw[e / 2], st.xd[8 * nt + 2 * tig + e % 2][s], c[e]));
    }
  }
}

template <class F>
__global__ void __launch_bounds__(kThreads, pipe::kMinBlocks)
    IntMmaB32Kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                    ActRows x, MmaRows map, float* __restrict__ y) {
  AwaitPriorKernels();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g8 = lane / 4, tig = lane % 4;
  // Row tiles vary fastest over the grid, so the blocks reading one column tile's weights run
  // together and the weights come from DRAM once.
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kCols;
  w = TileRows(map, blockIdx.x, row_bytes, w, sm.x_row, sm.y_row);
  if (!w) return;  // the whole block: an unused entry of the tile table
  for (int64_t f = threadIdx.x; f < nblk; f += kThreads)
    sm.schedule[f] = static_cast<int16_t>(ScheduledBlock(nblk, f));
  __syncthreads();
  const WeightTile wt{w, row_bytes, nblk, n_out, col0};
  const int64_t steps = (nblk + kStepBlocks - 1) / kStepBlocks;
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < steps) IssueStep<F>(sm.stage[i], sm, wt, x, int64_t{kStepBlocks} * i);
    pipe::CommitAsync();
  }
  TreeAcc tree[kNt][4];
  float acc[kNt][4] = {};
  int pi = 0;
  int64_t left = PartialBlocks(nblk, PartialAt(0));  // blocks of partial pi still to add
  for (int64_t step = 0; step < steps; ++step) {
    pipe::WaitAsync<kStages - 2>();  // this step's copies have landed (this thread's) ...
    __syncthreads();  // ... everyone's; the previous step's levels and stage are free
    const int64_t ahead = step + kStages - 1;
    if (ahead < steps) IssueStep<F>(sm.stage[ahead % kStages], sm, wt, x, kStepBlocks * ahead);
    pipe::CommitAsync();
    const Stage& st = sm.stage[step % kStages];
    const int64_t f0 = kStepBlocks * step;
    DecodeStep<F>(st, sm, wt, f0);
    __syncthreads();
    for (int s = 0; s < kStepBlocks && f0 + s < nblk; ++s) {
      for (; left == 0; left = PartialBlocks(nblk, PartialAt(++pi))) {
        FinishPartial(tree, PartialAt(pi), acc);
        ZeroAcc(acc);
      }
      AddBlock(st, sm, warp, lane, s, acc);
      --left;
    }
  }
  for (; pi < 8; ++pi) {
    FinishPartial(tree, PartialAt(pi), acc);
    ZeroAcc(acc);
  }
  StoreTile(tree, col0, warp, g8, tig, sm.y_row, n_out, y);
}

template <class F>
void Launch(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const ActRows& x,
            const MmaRows& map, unsigned tiles, float* y, cudaStream_t stream) {
  const dim3 grid = MmaGrid(tiles, n_out, kCols);
  constexpr size_t kSmem = sizeof(Smem);
  static_assert(kSmem * pipe::kMinBlocks <= 228 * 1024 - 1024 * pipe::kMinBlocks,
                "the blocks a multiprocessor is to hold do not fit its shared memory");
  // Set on every launch (cheap): one process may drive several devices.
  LS_CUDA_CHECK(cudaFuncSetAttribute(
      IntMmaB32Kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
  IntMmaB32Kernel<F><<<grid, kThreads, kSmem, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                        k / 32, n_out, x, map, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool LaunchIntMmaB32(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const ActRows& x, const MmaRows& map, unsigned tiles, float* y,
                     cudaStream_t stream) {
  if (!B32RowFits(type, k)) return false;
  switch (type) {
    case DType::Q8_0:
      Launch<intq::Q80>(w, row_bytes, k, n_out, x, map, tiles, y, stream);
      return true;
    case DType::Q5_0:
      Launch<intq::Q50>(w, row_bytes, k, n_out, x, map, tiles, y, stream);
      return true;
    case DType::Q4_0:
      Launch<intq::Q40>(w, row_bytes, k, n_out, x, map, tiles, y, stream);
      return true;
    default:
      return false;
  }
}

}  // namespace lockstep::backend::cuda

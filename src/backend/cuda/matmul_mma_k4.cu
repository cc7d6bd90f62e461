// The integer path's tensor-core kernel for Q4_K and Q5_K, the bulk of a Q4_K_M file, on the
// raw-block pipeline of mma_pipeline.cuh: MMA fragments are read with ldmatrix and cut from the
// raw nibbles. One m16n8k32 MMA covers one 32-element sub-block, so its exact int32 sum takes the
// sub-block's 6-bit scale once; the mins term (sum over sub-blocks of min times the activations'
// sum) is a second MMA per sub-block whose A operand is the min repeated over the sub-block,
// accumulated in the MMA's own accumulator: the same exact integer as quant::DotRow's mins dot,
// with no per-element integer work. Every block's float contribution and every partial's place in
// the Acc8 tree are quant::DotRow's, so the outputs are the CPU's bits whatever the tile or the
// number of rows.
#include "backend/cuda/matmul_mma_raw.h"

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/mma_pipeline.cuh"

namespace lockstep::backend::cuda {
namespace {

using pipe::kCols;
using pipe::kThreads;
constexpr int kRows = kMmaTileRows;  // activation rows per tile
constexpr int kNt = kRows / 8;       // MMA column tiles of 8 rows
// The staged block of every weight row is the raw one (144 bytes for Q4_K, 176 for Q5_K: rows
// that far apart put the 32 words of a fragment read in 32 different banks).
template <int kBytes>
using Stage = pipe::Stage<kBytes, kRows>;

__device__ __forceinline__ uint32_t Word(const void* p) {
  return *static_cast<const uint32_t*>(p);
}

// Starts the copy of block b of every column and row of the tile into `st` (one commit group).
template <class F>
__device__ void IssueStep(Stage<F::kBytes>& st, const uint8_t* __restrict__ w, int64_t row_bytes,
                          int64_t n_out, int64_t col0, const ActRows& x, const int64_t* x_row,
                          int64_t b) {
  constexpr int kPieces = F::kBytes / 16;
  for (int i = threadIdx.x; i < kCols * kPieces; i += kThreads) {
    const int c = i / kPieces, piece = i % kPieces;
    const bool ok = col0 + c < n_out;
    pipe::CopyAsync16(&st.w[c][16 * piece],
                      ok ? w + (col0 + c) * row_bytes + b * F::kBytes + 16 * piece : w, ok);
  }
  pipe::IssueActivations(st, x, x_row, b);
}

// The integer sums of one 256-block for the thread's 16 accumulator elements: element e of
// column tile nt is weight row 16 warp + g8 + 8 (e / 2) and activation row 8 nt + 2 tig + e % 2.
// isum: sum over sub-blocks j of scale_j times the sub-block's dot; imin: sum over j of min_j
// times the sub-block's activation sum (the MMA with min_j in every byte of A).
template <class F>
__device__ __forceinline__ void BlockSums(const Stage<F::kBytes>& st, int warp, int lane,
                                          const uint32_t (&sc)[2][2], const uint32_t (&mn)[2][2],
                                          int (&isum)[kNt][4], int (&imin)[kNt][4]) {
  constexpr int kQs = F::kBytes == 176 ? 48 : 16;  // Q5_K's 32 bytes of fifth bits come first
  const int g8 = lane / 4, tig = lane % 4, m = lane / 8, i8 = lane % 8;
  // ldmatrix rows: A matrices (columns 0-7 | 8-15) x (k bytes 0-15 | 16-31) of the warp's 16
  // weight rows; B matrices (k bytes 0-15 | 16-31) x (tile rows 8 nt .. +7) for nt = 2 q + m / 2.
  const uint32_t a_addr =
      pipe::SharedAddr(&st.w[16 * warp + 8 * (m & 1) + i8][kQs + 16 * (m >> 1)]);
  const uint32_t b_addr = pipe::BAddr(st, lane);
  uint32_t qh[2][2] = {};
  if (F::kBytes == 176)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = 16 * warp + g8 + 8 * h;
      qh[h][0] = Word(&st.w[col][16 + 4 * tig]), qh[h][1] = Word(&st.w[col][32 + 4 * tig]);
    }
    // Two pairs an iteration: fully unrolled, the 168-register cap spills twice as much.
#pragma unroll 2
  for (int pair = 0; pair < 4; ++pair) {
    uint32_t q[4];  // (column g8 | g8 + 8) x (k half): nibble bytes of sub-blocks 2 pair, +1
    pipe::LoadMatrices(a_addr + 32 * pair, q);
#pragma unroll
    for (int nib = 0; nib < 2; ++nib) {
      const int j = 2 * pair + nib;
      // m16n8k32 A: a0 (row g8, k 4 tig..), a1 (row g8 + 8), a2 and a3 the same at k + 16.
      uint32_t a[4];
      const uint32_t fifth[4] = {qh[0][0], qh[1][0], qh[0][1], qh[1][1]};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = (q[i] >> (4 * nib)) & 0x0F0F0F0Fu;
        if (F::kBytes == 176) a[i] |= ((fifth[i] >> j) & 0x01010101u) << 4;
      }
      const int sc0 = static_cast<int>(intq::ByteOf(j < 4 ? sc[0][0] : sc[0][1], j % 4));
      const int sc1 = static_cast<int>(intq::ByteOf(j < 4 ? sc[1][0] : sc[1][1], j % 4));
      // min_j of columns g8 and g8 + 8 in every byte: the A operand of the mins MMA.
      const uint32_t m0 = __byte_perm(j < 4 ? mn[0][0] : mn[0][1], 0, 0x1111 * (j % 4));
      const uint32_t m1 = __byte_perm(j < 4 ? mn[1][0] : mn[1][1], 0, 0x1111 * (j % 4));
      const uint32_t a_min[4] = {m0, m1, m0, m1};
      uint32_t b[kNt][2];  // [nt][k half]
      pipe::LoadB<kRows>(b_addr, 32 * j, b);
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        int c[4];
        pipe::Mma32(a, b[nt][0], b[nt][1], c);
        isum[nt][0] += sc0 * c[0], isum[nt][1] += sc0 * c[1];
        isum[nt][2] += sc1 * c[2], isum[nt][3] += sc1 * c[3];
        pipe::MmaAcc32(a_min, b[nt][0], b[nt][1], imin[nt]);
      }
    }
  }
}

// One 256-block's float contributions added to acc, as quant::DotRow adds them (CombineMin).
template <class F>
__device__ __forceinline__ void ComputeStep(const Stage<F::kBytes>& st, int warp, int lane,
                                            float (&acc)[kNt][4]) {
  const int g8 = lane / 4, tig = lane % 4;
  float d[2], dmin[2];
  uint32_t sc[2][2], mn[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4 head = *reinterpret_cast<const uint4*>(&st.w[16 * warp + g8 + 8 * h][0]);
    d[h] = intq::Half(head.x), dmin[h] = intq::Half(head.x >> 16);
    // quant::detail::ScaleMinK4 four sub-blocks at a time: scale bytes 0-3 in head.y, 4-7 in
    // head.z, 8-11 in head.w.
    const uint32_t s0 = head.y, s1 = head.z, s2 = head.w;
    sc[h][0] = s0 & 0x3F3F3F3Fu;
    sc[h][1] = (s2 & 0x0F0F0F0Fu) | (((s0 >> 6) & 0x03030303u) << 4);
    mn[h][0] = s1 & 0x3F3F3F3Fu;
    mn[h][1] = ((s2 >> 4) & 0x0F0F0F0Fu) | (((s1 >> 6) & 0x03030303u) << 4);
  }
  int isum[kNt][4] = {}, imin[kNt][4] = {};
  BlockSums<F>(st, warp, lane, sc, mn, isum, imin);
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float dx = st.xd[8 * nt + 2 * tig + e % 2];
      const int h = e / 2;
      acc[nt][e] =
          __fadd_rn(acc[nt][e], intq::CombineMin(d[h], dmin[h], dx, isum[nt][e], imin[nt][e]));
    }
}

using pipe::kMinBlocks;

template <class F, bool kSplit>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    IntMmaK4Kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                   ActRows x, MmaRows map, float* __restrict__ y, float* __restrict__ y2) {
  AwaitPriorKernels();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<pipe::Smem<F::kBytes, kRows>*>(smem_raw);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g8 = lane / 4, tig = lane % 4;
  // Row tiles vary fastest over the grid, so the blocks reading one column tile's weights run
  // together and the weights come from DRAM once.
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kCols;
  w = TileRows(map, blockIdx.x, row_bytes, w, sm.x_row, sm.y_row);
  if (!w) return;  // the whole block: an unused entry of the tile table
  __syncthreads();
  const auto issue = [&](int64_t s, int slot) {
    if (s >= nblk) return;
    const int64_t b = ScheduledBlock(nblk, s);
    IssueStep<F>(sm.stage[slot], w, row_bytes, n_out, col0, x, sm.x_row, b);
  };
  TreeAcc tree[kNt][4];
  const pipe::PartialRange range =
      kSplit ? pipe::RangeOf(nblk, 2, blockIdx.z) : pipe::PartialRange{};
  pipe::RunPartials<kRows, kSplit>(nblk, range, tree, issue,
                                   [&](int slot, int64_t, float(&acc)[kNt][4]) {
                                     ComputeStep<F>(sm.stage[slot], warp, lane, acc);
                                   });
  // A split launch: the first half its half total into y, the second into y2 (the caller adds).
  StoreTile(tree, col0, warp, g8, tig, sm.y_row, n_out, blockIdx.z == 0 ? y : y2);
}

template <class F>
void Launch(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const ActRows& x,
            const MmaRows& map, unsigned tiles, float* y, float* y2, cudaStream_t stream) {
  dim3 grid = MmaGrid(tiles, n_out, kCols);
  grid.z = y2 ? 2 : 1;
  constexpr size_t kSmem = sizeof(pipe::Smem<F::kBytes, kRows>);
  static_assert(kSmem * kMinBlocks <= 228 * 1024 - 1024 * kMinBlocks,
                "the blocks a multiprocessor is to hold do not fit its shared memory");
  // Set on every launch (cheap): one process may drive several devices.
  auto* kernel = y2 ? IntMmaK4Kernel<F, true> : IntMmaK4Kernel<F, false>;
  LS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmem)));
  kernel<<<grid, kThreads, kSmem, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                            k / F::kElems, n_out, x, map, y, y2);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool LaunchIntMmaK4(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                    const ActRows& x, const MmaRows& map, unsigned tiles, float* y, float* y2,
                    cudaStream_t stream) {
  switch (type) {
    case DType::Q4_K:
      Launch<intq::K45<false>>(w, row_bytes, k, n_out, x, map, tiles, y, y2, stream);
      return true;
    case DType::Q5_K:
      Launch<intq::K45<true>>(w, row_bytes, k, n_out, x, map, tiles, y, y2, stream);
      return true;
    default:
      return false;
  }
}

}  // namespace lockstep::backend::cuda

// Device pieces shared by the integer path's tensor-core kernels (matmul_mma_k4.cu,
// matmul_mma_q6k.cu, matmul_mma_b32.cu) and their launchers (matmul_mma.cu): which rows a tile
// holds and the fixed float tree that ends each output as quant::detail::Acc8 ends it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.h"

namespace lockstep::backend::cuda {

inline constexpr int kMmaTileRows = 32;  // activation rows per block

// Which rows a block's tile holds. Dense (perm null): rows [32 y, 32 y + 32) of `rows`. Grouped:
// tile y is entry y of a table of runs of one expert's tasks (perm: tasks sorted by expert);
// task t reads activation row t / x_div and the expert's weight rows, and writes output row t.
struct MmaRows {
  const int32_t* perm;
  const int32_t* tile_expert;
  const int32_t* tile_start;
  const int32_t* tile_count;
  int64_t rows_per_expert, x_div, rows;
};

// The grid of a tensor-core launch: row tiles vary fastest, so the blocks reading one column
// tile's weights run together and the weights come from DRAM once.
inline dim3 MmaGrid(unsigned row_tiles, int64_t n_out, int tile_cols) {
  const int64_t col_tiles = CeilDiv(n_out, tile_cols);
  LS_CUDA_REQUIRE(col_tiles <= 65535, "cuda matmul: %lld output columns",
                  static_cast<long long>(n_out));
  return dim3(row_tiles, static_cast<unsigned>(col_tiles));
}

// The partials of Acc8 in the order the kernels finish them: 0, 4, 1, 5, 2, 6, 3, 7.
__device__ __forceinline__ int PartialAt(int i) {
  return (i % 2) * 4 + i / 2;
}

// Blocks of partial p (blocks p, p + 8, ...) in a row of nblk blocks.
__device__ __forceinline__ int64_t PartialBlocks(int64_t nblk, int p) {
  return p < nblk ? (nblk - 1 - p) / 8 + 1 : 0;
}

// The block at position f of the order every tensor-core kernel takes a row's blocks in:
// partial PartialAt(0)'s blocks ascending, then PartialAt(1)'s, ... (the order the accumulators
// finish them); nblk past the end.
__device__ __forceinline__ int64_t ScheduledBlock(int64_t nblk, int64_t f) {
#pragma unroll
  for (int pi = 0; pi < 8; ++pi) {
    const int p = PartialAt(pi);
    const int64_t n = PartialBlocks(nblk, p);
    if (f < n) return p + 8 * f;
    f -= n;
  }
  return nblk;
}

// The float tree of Acc8 run as partials complete in PartialAt order. At most three values are
// live at once (a partial waiting for its pair, a pair waiting for the next, the first half), so
// three registers a tree: the fourth of a struct of named sums stayed live across the whole
// K loop and cost a tile 16 registers.
struct TreeAcc {
  float waiting = 0.0f, pair = 0.0f, half0 = 0.0f;
  __device__ void Finish(int p, float a) {
    switch (p) {
      case 0:
      case 1:
      case 2:
      case 3:
        waiting = a;
        break;
      case 4:
      case 6:
        pair = __fadd_rn(waiting, a);
        break;  // a0 + a4, a2 + a6
      case 5:
        half0 = __fadd_rn(pair, __fadd_rn(waiting, a));
        break;  // (a0 + a4) + (a1 + a5)
      case 7:
        pair = __fadd_rn(half0, __fadd_rn(pair, __fadd_rn(waiting, a)));
        break;  // half0 + ((a2 + a6) + (a3 + a7)): the total
    }
  }
  __device__ float Total() const { return pair; }
  // A launch split in two (matmul_mma_raw.h): the first half runs partials 0, 4, 1, 5 and keeps
  // (a0 + a4) + (a1 + a5) as its total; the second runs 2, 6, 3, 7 and ends with
  // (a2 + a6) + (a3 + a7) instead of adding it to a first half it never had; their sum is the
  // tree's top add, the same float as Total() of one launch.
  __device__ void EndFirstHalf() { pair = half0; }
  __device__ void FinishSecondHalf(float a7) { pair = __fadd_rn(pair, __fadd_rn(waiting, a7)); }
};

// The accumulators of a 64 x 32 tile's thread, element e of column tile nt being weight row
// 16 warp + g8 + 8 (e / 2) and tile row 8 nt + 2 tig + e % 2 (the m16n8 layout): partial p's
// values into the tree, and the tree's totals into y.
template <int kNt>
__device__ __forceinline__ void FinishPartial(TreeAcc (&tree)[kNt][4], int p,
                                              const float (&acc)[kNt][4]) {
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) tree[nt][e].Finish(p, acc[nt][e]);
}
template <int kNt>
__device__ __forceinline__ void StoreTile(const TreeAcc (&tree)[kNt][4], int64_t col0, int warp,
                                          int g8, int tig, const int64_t* y_row, int64_t n_out,
                                          float* y) {
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t col = col0 + 16 * warp + g8 + 8 * (e / 2);
      const int64_t row = y_row[8 * nt + 2 * tig + e % 2];
      if (col < n_out && row >= 0) y[row * n_out + col] = tree[nt][e].Total();
    }
}

// The rows of a tile (blockIdx `tile`): fills x_row (activation row, -1 for none) and y_row
// (output row) for the block's kMmaTileRows rows and returns the weights the tile reads (w, or
// its expert's rows); null when the tile is an unused entry of a grouped table.
__device__ __forceinline__ const uint8_t* TileRows(const MmaRows& map, unsigned tile,
                                                   int64_t row_bytes, const uint8_t* w,
                                                   int64_t* x_row, int64_t* y_row) {
  int64_t first = static_cast<int64_t>(tile) * kMmaTileRows, count = map.rows - first;
  if (map.perm) {
    first = map.tile_start[tile], count = map.tile_count[tile];
    if (count == 0) return nullptr;
    w += static_cast<int64_t>(map.tile_expert[tile]) * map.rows_per_expert * row_bytes;
  }
  for (int r = threadIdx.x; r < kMmaTileRows; r += blockDim.x) {
    const int64_t task = r >= count ? -1 : map.perm ? map.perm[first + r] : first + r;
    x_row[r] = task < 0 ? -1 : task / map.x_div;
    y_row[r] = task;
  }
  return w;
}

}  // namespace lockstep::backend::cuda

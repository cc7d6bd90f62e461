// The launchers of the integer path's tensor-core kernels for many rows (prefill, verify
// passes; the kernels are those of matmul_mma_raw.h: Q4_K and Q5_K, Q6_K, and the 32-element
// formats Q8_0, Q5_0 and Q4_0), which of them a dense product takes, and the grouped launch's
// tile table. Every kernel adds each block's float contribution exactly as quant::detail::Acc8
// adds it: partial p = b % 8 sums its blocks in ascending order, then ((a0 + a4) + (a1 + a5)) +
// ((a2 + a6) + (a3 + a7)). Integers do not depend on their order and the float sequence is the
// CPU's, so every output equals matmul_int.cu's and quant::DotRow's, bit for bit, whatever the
// tile or the number of rows.
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/matmul_mma_raw.h"
#include "backend/cuda/mma_common.cuh"
#include "backend/cuda/mma_pipeline.cuh"

namespace lockstep::backend::cuda {
namespace {

constexpr int kTileCols = pipe::kCols;   // weight rows (outputs) per block: 16 per warp
constexpr int kTileRows = kMmaTileRows;  // 4 MMA column tiles of 8
constexpr int kMaxMmaExperts = 256;

// Whether the current device has int8 MMA (compute capability 8.0 or later).
bool DeviceHasIntMma() {
  int device = 0, major = 0;
  LS_CUDA_CHECK(cudaGetDevice(&device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

// The tile table of the grouped launch: tasks sorted by expert (stable), runs of at most
// kTileRows tasks of one expert. Two launches of a warp per expert: the first counts the
// expert's tasks, the second places them (a task's place is its expert's offset, the sum of the
// counts below, plus the number of earlier tasks of that expert, from ballots) and writes the
// expert's tiles. Integer sums and ballots: the same table for any launch shape. (One block
// doing it all took 80-116 us a launch at 2,048-4,096 tasks, 9% of a 26B-A4B prefill, session
// 14 profiles: every task read by every expert on one multiprocessor.)
constexpr int kTableWarps = 8;  // experts per block

__global__ void __launch_bounds__(kTableWarps* kWarp)
    ExpertCountKernel(const int32_t* __restrict__ experts, int64_t tasks, int n_expert,
                      int32_t* counts) {
  AwaitPriorKernels();
  const int lane = threadIdx.x % kWarp;
  const int e = static_cast<int>(blockIdx.x) * kTableWarps + static_cast<int>(threadIdx.x) / kWarp;
  if (e >= n_expert) return;
  int32_t n = 0;
#pragma unroll 8
  for (int64_t base = 0; base < tasks; base += kWarp)
    n += __popc(__ballot_sync(0xffffffffu, base + lane < tasks && experts[base + lane] == e));
  if (lane == 0) counts[e] = n;
}

__global__ void __launch_bounds__(kTableWarps* kWarp)
    ExpertPlaceKernel(const int32_t* __restrict__ experts, int64_t tasks, int n_expert,
                      int64_t max_tiles, const int32_t* __restrict__ counts, int32_t* perm,
                      int32_t* tile_expert, int32_t* tile_start, int32_t* tile_count) {
  AwaitPriorKernels();
  const int lane = threadIdx.x % kWarp;
  const int e = static_cast<int>(blockIdx.x) * kTableWarps + static_cast<int>(threadIdx.x) / kWarp;
  if (e >= n_expert) return;
  int32_t below = 0, tiles_below = 0, tiles = 0;
  for (int i = lane; i < n_expert; i += kWarp) {
    const int32_t c = counts[i], t = (c + kTileRows - 1) / kTileRows;
    if (i < e) below += c, tiles_below += t;
    tiles += t;
  }
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) {  // integer sums: any order
    below += __shfl_xor_sync(0xffffffffu, below, off);
    tiles_below += __shfl_xor_sync(0xffffffffu, tiles_below, off);
    tiles += __shfl_xor_sync(0xffffffffu, tiles, off);
  }
  const int32_t count = counts[e];
  for (int32_t off = kTileRows * lane; off < count; off += kTileRows * kWarp) {
    const int32_t tile = tiles_below + off / kTileRows;
    tile_expert[tile] = e, tile_start[tile] = below + off;
    tile_count[tile] = min(kTileRows, count - off);
  }
  for (int64_t tile = tiles + static_cast<int64_t>(e) * kWarp + lane; tile < max_tiles;
       tile += static_cast<int64_t>(n_expert) * kWarp)
    tile_expert[tile] = 0, tile_start[tile] = 0, tile_count[tile] = 0;
  const unsigned lanes_below = (1u << lane) - 1u;
  int32_t at = below;
#pragma unroll 4
  for (int64_t base = 0; base < tasks; base += kWarp) {
    const bool mine = base + lane < tasks && experts[base + lane] == e;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (mine) perm[at + __popc(ballot & lanes_below)] = static_cast<int32_t>(base + lane);
    at += __popc(ballot);
  }
}

bool RawBlockType(DType type) {
  return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
}

int64_t MaxTiles(int64_t tasks, int n_expert) {
  return (tasks + kTileRows - 1) / kTileRows + n_expert;
}

}  // namespace

size_t ExpertTileBytes(int64_t tasks, int n_expert) {
  return static_cast<size_t>(tasks + 3 * MaxTiles(tasks, n_expert) + n_expert) * sizeof(int32_t);
}

namespace {

int Multiprocessors() {
  int device = 0, sms = 0;
  LS_CUDA_CHECK(cudaGetDevice(&device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// Blocks of a dense launch, whole or split (SplitsWave).
int64_t DenseBlocks(int64_t rows, int64_t n_out) {
  return CeilDiv(rows, kTileRows) * static_cast<int64_t>(CeilDiv(n_out, kTileCols));
}
// Split when both halves together still fit one wave of the device's `sms` multiprocessors (64
// rows x 5,376 outputs: 168 blocks for 396 places on 132 multiprocessors of 3), each block then
// doing half the work. A fuller last wave alone does not pay (session 19, H100: 512 rows x 5,376
// outputs, 3.39 waves, 5% slower split).
bool SplitsWave(int64_t rows, int64_t n_out, int sms) {
  return 2 * DenseBlocks(rows, n_out) <= static_cast<int64_t>(pipe::kMinBlocks) * sms;
}

// Fewest rows of a large enough raw-block product on the tensor cores. Session 22 (H100, 31B's
// 21,504 x 5,376 and 5,376 x 21,504 Q4_K/Q6_K): the tensor-core kernel takes 66-120 us for 2 to
// 16 rows, the dp4a kernel 45-60 us for 2 rows and 79-99 for 3, up to 176-205 for 8.
int64_t MmaFewRows() {
  static const int64_t few = [] {
    const char* env = std::getenv("LOCKSTEP_CUDA_MMA_FEW_ROWS");
    const long v = env ? std::strtol(env, nullptr, 10) : 0;
    return v > 0 ? static_cast<int64_t>(v) : int64_t{3};
  }();
  return few;
}

// DenseTakesIntMma on a device of `sms` multiprocessors.
bool TakesIntMma(DType type, int64_t rows, int64_t n_out, int sms) {
  if (rows >= kMmaMinRows) return true;
  if (rows < MmaFewRows() || !RawBlockType(type) || !DeviceHasIntMma()) return false;
  // 26B-A4B's 2,816-4,096-wide products at 4 and 8 rows ran 1.2-1.5x slower on 44-64 column
  // tiles (88-128 blocks split) for 132 multiprocessors; 31B's 5,376 gives 168 split blocks.
  const int64_t blocks = DenseBlocks(rows, n_out) * (SplitsWave(rows, n_out, sms) ? 2 : 1);
  return 4 * blocks >= 5 * static_cast<int64_t>(sms);
}

}  // namespace

bool DenseTakesIntMma(DType type, int64_t rows, int64_t n_out) {
  if (rows >= kMmaMinRows) return true;
  // Decode's one and two rows end here, without asking the device anything.
  return rows >= MmaFewRows() && TakesIntMma(type, rows, n_out, Multiprocessors());
}

bool SplitsIntMma(DType type, int64_t rows, int64_t n_out) {
  if (!RawBlockType(type) || !DeviceHasIntMma()) return false;
  const int sms = Multiprocessors();
  return TakesIntMma(type, rows, n_out, sms) && SplitsWave(rows, n_out, sms);
}

bool LaunchIntMma(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                  const ActRows& x, int64_t rows, float* y, float* split, cudaStream_t stream) {
  if (!DeviceHasIntMma()) return false;
  const MmaRows map{nullptr, nullptr, nullptr, nullptr, 0, 1, rows};
  const auto tiles = static_cast<unsigned>(CeilDiv(rows, kTileRows));
  // The caller passes `split` exactly where SplitsIntMma.
  if (LaunchIntMmaK4(type, w, row_bytes, k, n_out, x, map, tiles, y, split, stream) ||
      LaunchIntMmaQ6K(type, w, row_bytes, k, n_out, x, map, tiles, y, split, stream)) {
    if (split) LaunchBinary(Binary::kAdd, y, split, y, rows * n_out, stream);  // the tree's top add
    return true;
  }
  return LaunchIntMmaB32(type, w, row_bytes, k, n_out, x, map, tiles, y, stream);
}

bool LaunchIntMmaGrouped(const GatheredMatMul& m, int n_expert, const ActRows& x, void* tiles,
                         cudaStream_t stream) {
  if (!DeviceHasIntMma() || !m.experts || m.ids || n_expert > kMaxMmaExperts ||
      !HasIntegerPath(m.type) || !B32RowFits(m.type, m.k))
    return false;
  const int64_t max_tiles = MaxTiles(m.tasks, n_expert);
  auto* perm = static_cast<int32_t*>(tiles);
  int32_t* tile_expert = perm + m.tasks;
  int32_t* tile_start = tile_expert + max_tiles;
  int32_t* tile_count = tile_start + max_tiles;
  int32_t* counts = tile_count + max_tiles;
  if (!m.tiles_ready) {
    const auto table_blocks = static_cast<unsigned>(CeilDiv(n_expert, kTableWarps));
    ExpertCountKernel<<<table_blocks, kTableWarps * kWarp, 0, stream>>>(m.experts, m.tasks,
                                                                        n_expert, counts);
    LS_CUDA_LAUNCHED();
    ExpertPlaceKernel<<<table_blocks, kTableWarps * kWarp, 0, stream>>>(
        m.experts, m.tasks, n_expert, max_tiles, counts, perm, tile_expert, tile_start, tile_count);
    LS_CUDA_LAUNCHED();
  }
  const MmaRows map{perm, tile_expert, tile_start, tile_count, m.rows_per_expert, m.x_div, m.tasks};
  const auto n_tiles = static_cast<unsigned>(max_tiles);
  if (LaunchIntMmaK4(m.type, m.w, m.row_bytes, m.k, m.n_out, x, map, n_tiles, m.y, nullptr,
                     stream) ||
      LaunchIntMmaQ6K(m.type, m.w, m.row_bytes, m.k, m.n_out, x, map, n_tiles, m.y, nullptr,
                      stream))
    return true;
  return LaunchIntMmaB32(m.type, m.w, m.row_bytes, m.k, m.n_out, x, map, n_tiles, m.y, stream);
}

}  // namespace lockstep::backend::cuda

// The integer path's tensor-core kernel for many rows (prefill, verify passes) of the 32-element
// formats (Q8_0, Q4_0, Q5_0; Q4_K, Q5_K and Q6_K run the raw-block kernels of
// matmul_mma_raw.h), and the launchers of all of them with the grouped launch's tile table: int8
// MMAs (m16n8k16, exact int32 sums of 16 products) give each 16-element group's integer sum, the
// group scales are applied in integers, and each block's float contribution is added
// exactly as quant::detail::Acc8 adds it: partial p = b % 8 sums its blocks in ascending order,
// then ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)). Integers do not depend on their order
// and the float sequence is the CPU's, so every output equals matmul_int.cu's and
// quant::DotRow's, bit for bit, whatever the tile or the number of rows.
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/matmul_mma_raw.h"
#include "backend/cuda/mma_common.cuh"
#include "backend/cuda/mma_pipeline.cuh"

namespace lockstep::backend::cuda {
namespace {

constexpr int kTileCols = 64;            // weight rows (outputs) per block: 16 per warp
constexpr int kTileRows = kMmaTileRows;  // 4 MMA column tiles of 8
constexpr int kWarps = kTileCols / 16;
constexpr int kThreads = kWarps * kWarp;
constexpr int kStepK = 256;           // elements of a row staged per step
constexpr int kGroups = kStepK / 16;  // 16-element groups per step
constexpr int kStride = kStepK + 16;  // bytes per staged row (bank-conflict-free fragments)
constexpr int kSubs = kStepK / 32;    // 32-element sub-blocks per step

constexpr int kMaxMmaExperts = 256;

struct Smem {
  int8_t w[kTileCols][kStride];
  int8_t x[kTileRows][kStride];
  int w_scale[kTileCols][kGroups];
  float w_d[kTileCols][kSubs];
  float x_d[kTileRows][kSubs];
  int64_t x_row[kTileRows];  // activation row of each tile row (-1: none)
  int64_t y_row[kTileRows];  // output row of each tile row
};

__device__ __forceinline__ void Mma16(const uint32_t (&a)[2], uint32_t b, int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // int8 MMA needs sm_80; LaunchIntMma never launches there
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%8,%9,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0), "r"(0), "r"(0), "r"(0));
#endif
}

// Whether the current device has int8 MMA (compute capability 8.0 or later).
bool DeviceHasIntMma() {
  int device = 0, major = 0;
  LS_CUDA_CHECK(cudaGetDevice(&device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

// The blocks of one step: the 8 blocks at schedule positions b .. b + 7 (every step full,
// whatever nblk % 8: a step of one partial's blocks b, b + 8, ... left 5 of 8 sub-blocks empty
// for the 22-block rows of a 704-wide expert). Sub-block s of the step is block
// ScheduledBlock(nblk, b + s), element range [32 s, 32 s + 32) of the staged rows.
template <class F>
__device__ void StageStep(Smem& sm, const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk,
                          int64_t n_out, int64_t col0, const ActRows& x, int64_t b) {
  // Weights: (column, sub-block) tasks, decoded to int8 levels with their group scales.
  for (int task = threadIdx.x; task < kTileCols * kSubs; task += kThreads) {
    const int c = task / kSubs, s = task % kSubs;
    const int64_t col = col0 + c, blk = ScheduledBlock(nblk, b + s);
    uint32_t lv[8] = {};
    int sc[2] = {0, 0};
    float d = 0.0f;
    if (col < n_out && blk < nblk) {
      const uint8_t* bp = w + col * row_bytes + blk * F::kBytes;
      F::Levels32(bp, lv, sc);
      d = F::Scale(bp);
    }
    uint4* dst = reinterpret_cast<uint4*>(&sm.w[c][32 * s]);
    dst[0] = make_uint4(lv[0], lv[1], lv[2], lv[3]);
    dst[1] = make_uint4(lv[4], lv[5], lv[6], lv[7]);
    sm.w_scale[c][2 * s] = sc[0], sm.w_scale[c][2 * s + 1] = sc[1];
    sm.w_d[c][s] = d;
  }
  // Activations: 16-byte pieces of the quantized rows and their scales.
  const int64_t d_stride = x.k / F::kElems;
  for (int task = threadIdx.x; task < kTileRows * (kStepK / 16); task += kThreads) {
    const int r = task / (kStepK / 16), piece = task % (kStepK / 16);
    const int s = piece / 2;
    const int64_t row = sm.x_row[r], blk = ScheduledBlock(nblk, b + s);
    const bool live = row >= 0 && blk < nblk;
    int4 v = make_int4(0, 0, 0, 0);
    if (live)
      v = *reinterpret_cast<const int4*>(x.q + row * x.k + blk * F::kElems + 16 * (piece % 2));
    *reinterpret_cast<int4*>(&sm.x[r][16 * piece]) = v;
    if (piece % 2 == 0) sm.x_d[r][s] = live ? x.d[row * d_stride + blk] : 0.0f;
  }
}

// Sub-block s's integer sums for this thread's accumulator elements (group scales applied),
// added to isum.
__device__ __forceinline__ void SubSums(const Smem& sm, int warp, int g8, int tig, int s,
                                        int (&isum)[4][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int k0 = 32 * s + 16 * h + 4 * tig, grp = 2 * s + h;
    const uint32_t a[2] = {*reinterpret_cast<const uint32_t*>(&sm.w[16 * warp + g8][k0]),
                           *reinterpret_cast<const uint32_t*>(&sm.w[16 * warp + g8 + 8][k0])};
    const int sc_lo = sm.w_scale[16 * warp + g8][grp];
    const int sc_hi = sm.w_scale[16 * warp + g8 + 8][grp];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      int c[4];
      Mma16(a, *reinterpret_cast<const uint32_t*>(&sm.x[8 * nt + g8][k0]), c);
      isum[nt][0] += sc_lo * c[0], isum[nt][1] += sc_lo * c[1];
      isum[nt][2] += sc_hi * c[2], isum[nt][3] += sc_hi * c[3];
    }
  }
}

__device__ __forceinline__ void ZeroAcc(float (&acc)[4][4]) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
}

template <class F>
__global__ void __launch_bounds__(kThreads)
    IntMmaKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                 ActRows x, MmaRows map, float* __restrict__ y) {
  AwaitPriorKernels();
  static_assert(F::kElems == 32, "the 256-element formats run the raw-block kernels");
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g8 = lane / 4, tig = lane % 4;
  // Row tiles vary fastest over the grid: the blocks reading one column tile's weights run
  // together, so the weights come from DRAM once.
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kTileCols;
  w = TileRows(map, blockIdx.x, row_bytes, w, sm.x_row, sm.y_row);
  if (!w) return;  // the whole block: an unused entry of the tile table
  // Element e of column tile nt: weight row 16 warp + g8 + 8 (e / 2), activation row
  // 8 nt + 2 tig + e % 2 (the m16n8 accumulator layout).
  TreeAcc tree[4][4];
  // Each staged sub-block is one block; partial PartialAt(pi) gets its contributions in
  // ascending block order and is finished (empty ones with 0) before the next starts.
  float acc[4][4] = {};
  int pi = 0;
  int64_t left = PartialBlocks(nblk, PartialAt(0));  // blocks of partial pi still to add
  for (int64_t b = 0; b < nblk; b += kSubs) {
    __syncthreads();
    StageStep<F>(sm, w, row_bytes, nblk, n_out, col0, x, b);
    __syncthreads();
    for (int s = 0; s < kSubs && b + s < nblk; ++s) {
      for (; left == 0; left = PartialBlocks(nblk, PartialAt(++pi))) {
        FinishPartial(tree, PartialAt(pi), acc);
        ZeroAcc(acc);
      }
      int isum[4][4] = {};
      SubSums(sm, warp, g8, tig, s, isum);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = 16 * warp + g8 + 8 * (e / 2), r = 8 * nt + 2 * tig + e % 2;
          acc[nt][e] =
              __fadd_rn(acc[nt][e], intq::Combine(sm.w_d[c][s], sm.x_d[r][s], isum[nt][e]));
        }
      --left;
    }
  }
  for (; pi < 8; ++pi) {
    FinishPartial(tree, PartialAt(pi), acc);
    ZeroAcc(acc);
  }
  StoreTile(tree, col0, warp, g8, tig, sm.y_row, n_out, y);
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

template <class F>
void Launch(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const ActRows& x,
            const MmaRows& map, unsigned tiles, float* y, cudaStream_t stream) {
  const dim3 grid = MmaGrid(tiles, n_out, kTileCols);
  constexpr size_t kSmem = sizeof(Smem);
  static_assert(kSmem <= 227 * 1024, "shared memory of one block");
  // Set on every launch (cheap): one process may drive several devices.
  LS_CUDA_CHECK(cudaFuncSetAttribute(IntMmaKernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmem)));
  IntMmaKernel<F><<<grid, kThreads, kSmem, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                     k / F::kElems, n_out, x, map, y);
  LS_CUDA_LAUNCHED();
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
  if (UnverifiedKernelOn("b32") &&
      LaunchIntMmaB32(type, w, row_bytes, k, n_out, x, map, tiles, y, stream))
    return true;
  return DispatchIntFormat(type, [&](auto f) {
    if constexpr (decltype(f)::kElems == 32)  // the 256-element formats went to the raw kernels
      Launch<decltype(f)>(w, row_bytes, k, n_out, x, map, tiles, y, stream);
  });
}

bool LaunchIntMmaGrouped(const GatheredMatMul& m, int n_expert, const ActRows& x, void* tiles,
                         cudaStream_t stream) {
  if (!DeviceHasIntMma() || !m.experts || m.ids || n_expert > kMaxMmaExperts ||
      !HasIntegerPath(m.type))
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
  if (UnverifiedKernelOn("b32") &&
      LaunchIntMmaB32(m.type, m.w, m.row_bytes, m.k, m.n_out, x, map, n_tiles, m.y, stream))
    return true;
  return DispatchIntFormat(m.type, [&](auto f) {
    if constexpr (decltype(f)::kElems == 32)
      Launch<decltype(f)>(m.w, m.row_bytes, m.k, m.n_out, x, map, n_tiles, m.y, stream);
  });
}

}  // namespace lockstep::backend::cuda

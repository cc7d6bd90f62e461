// The integer matmul path (contract in matmul_int.h): activation quantization as
// quant::PrepareRow, then one warp per output column whose 8 groups of 4 lanes take weight
// blocks b = g, g + 8, ... in ascending order, so group g's running sum is the CPU's partial
// b % 8 = g, added in the CPU's order; the fixed tree of quant::detail::Acc8 ends it
// (int_gemv.cuh). One and two rows of the 256-element formats read their activation rows from
// shared memory (matmul_int_staged.cuh); more rows, the 32-element formats, expert tasks and
// devices before sm_80 keep them in L1 (DotColumn).
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/int_blocks.cuh"
#include "backend/cuda/int_gemv.cuh"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/matmul_int_staged.cuh"
#include "backend/cuda/matmul_mma.h"

namespace lockstep::backend::cuda {
namespace {

using namespace intmm;  // NOLINT(google-build-using-namespace): this file's own kernels

constexpr int kMaxRows = 8;

// One warp per activation block of B elements (B / 32 per lane): quant::QuantizeQ8Block, and for
// B = 256 the 16-level sums (PrepareQ8x256).
template <int B>
__global__ void QuantizeRowsKernel(const float* __restrict__ x, int64_t n_blocks,
                                   int8_t* __restrict__ q, float* __restrict__ d,
                                   int16_t* __restrict__ bsum) {
  AwaitPriorKernels();
  constexpr int E = B / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (blk >= n_blocks) return;
  const float* xb = x + blk * B + lane * E;
  float v[E];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    v[i] = xb[i];
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = WarpMax(amax);  // a maximum is exact in any order
  const float scale = __fdiv_rn(amax, 127.0f);
  const float inv = scale != 0.0f ? __fdiv_rn(1.0f, scale) : 0.0f;
  int8_t lv[E];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    lv[i] = static_cast<int8_t>(RoundHalfAway(__fmul_rn(v[i], inv)));
    sum += lv[i];
  }
  int8_t* qb = q + blk * B + lane * E;
#pragma unroll
  for (int i = 0; i < E; ++i) qb[i] = lv[i];
  if (lane == 0) d[blk] = scale;
  if constexpr (B == 256) {  // lanes 2g and 2g + 1 hold the 16 levels of group g
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (lane % 2 == 0) bsum[blk * 16 + lane / 2] = static_cast<int16_t>(sum);
  }
}

template <class F>
ActRows QuantizeRows(const float* x, int64_t rows, int64_t k, void* act, cudaStream_t stream) {
  const ActLayout lay(F::kElems, rows, k);
  const int64_t n_blocks = rows * (k / F::kElems);
  constexpr int kWarps = 8;
  QuantizeRowsKernel<F::kElems><<<CeilDiv(n_blocks, kWarps), kWarps * kWarp, 0, stream>>>(
      x, n_blocks, lay.Q(act), lay.D(act), lay.Bsum(act));
  LS_CUDA_LAUNCHED();
  return lay.View(act, k);
}

template <class F, int R>
__device__ __forceinline__ void MatMulColumn(const uint8_t* __restrict__ w, int64_t row_bytes,
                                             int64_t nblk, int64_t n_out, const ActRows& x,
                                             int64_t rows, float* __restrict__ y) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x / kWarp;
  // The weights are no kernel's output: the first stripe is fetched into L2 before
  // AwaitPriorKernels (holding no registers), so in a replayed step its DRAM latency overlaps
  // the kernels before this one.
  if (col < n_out) PrefetchStripe<F, R>(w + col * row_bytes, nblk);
  AwaitPriorKernels();
  if (col >= n_out) return;  // whole warps only
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), rows - r0));
  int64_t xr[R];
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) xr[r] = r0 + r, acc[r] = 0.0f;
  DotColumn<F, R>(w + col * row_bytes, nblk, x, xr, nr, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = Acc8Tree(acc[r]);
    if (threadIdx.x % kWarp == 0 && r < nr) y[(r0 + r) * n_out + col] = s;
  }
}

template <class F>
__device__ __forceinline__ void GatheredColumn(const GatheredMatMul& m, const ActRows& x) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x / kWarp;
  const int64_t t = blockIdx.y;
  if (j >= m.n_out) return;
  int64_t wr = m.ids ? m.ids[t * m.n_out + j] : j;
  if (m.experts) wr += static_cast<int64_t>(m.experts[t]) * m.rows_per_expert;
  const int64_t xr[1] = {t / m.x_div};
  float acc[1] = {0.0f};
  DotColumn<F, 1>(static_cast<const uint8_t*>(m.w) + wr * m.row_bytes, m.k / F::kElems, x, xr, 1,
                  acc);
  const float s = Acc8Tree(acc[0]);
  if (threadIdx.x % kWarp == 0) m.y[t * m.n_out + j] = s;
}

// Short rows (one stripe: at most 8 * U blocks, such as the 704-wide expert down projections'
// 22 blocks of 32) give a warp one load round trip of work, so the launch is waves of warps
// waiting on memory: here a warp takes C columns of its task, every load of the C columns issued
// before any is used. Each column's arithmetic is DotColumn's for one stripe (group g's blocks
// g, 8 + g, ... added in ascending order, the Acc8 tree): the same bits.
template <class F>
constexpr int NarrowColumns() {
  return 4;
}
template <class F>
constexpr bool IsNarrow(int64_t nblk) {
  return F::kElems == 32 && nblk <= 8 * F::kUnroll;
}

template <class F, int C>
__device__ __forceinline__ void GatheredColumnsNarrow(const GatheredMatMul& m, const ActRows& x) {
  constexpr int U = F::kUnroll;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x / kWarp) * C;
  const int64_t task = blockIdx.y;
  if (j0 >= m.n_out) return;  // whole warps only
  const int64_t nblk = m.k / F::kElems;
  const int64_t expert_row =
      m.experts ? static_cast<int64_t>(m.experts[task]) * m.rows_per_expert : 0;
  const auto* w = static_cast<const uint8_t*>(m.w);
  typename F::Raw raw[C][U];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = j0 + c;
    const int64_t wr = j < m.n_out ? (m.ids ? m.ids[task * m.n_out + j] : j) + expert_row : 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t b = 8 * u + g;
      raw[c][u] = {};
      if (j < m.n_out && b < nblk) F::LoadRaw(w + wr * m.row_bytes + b * F::kBytes, t, raw[c][u]);
    }
  }
  const int64_t xr = task / m.x_div;
  const int64_t q_stride = x.k, d_stride = x.k / F::kElems, s_stride = x.k / 16;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t b = 8 * u + g;
      const bool ok = b < nblk;
      typename F::Part part;
      if constexpr (std::is_same_v<typename F::Raw, typename F::Part>)
        part = raw[c][u];
      else
        F::Unpack(raw[c][u], t, part);
      int isum = 0, imin = 0;
      if (ok)
        F::Dot(part, x.q + xr * q_stride + b * F::kElems, x.bsum + xr * s_stride + b * 16, t, &isum,
               &imin);
      isum += __shfl_xor_sync(0xffffffffu, isum, 1);
      isum += __shfl_xor_sync(0xffffffffu, isum, 2);
      if (F::kMin) {
        imin += __shfl_xor_sync(0xffffffffu, imin, 1);
        imin += __shfl_xor_sync(0xffffffffu, imin, 2);
      }
      if (ok) acc = __fadd_rn(acc, F::Contribution(part, x.d[xr * d_stride + b], isum, imin));
    }
    const float s = Acc8Tree(acc);
    if (lane == 0 && j0 + c < m.n_out) m.y[task * m.n_out + j0 + c] = s;
  }
}

template <class F>
__global__ void __launch_bounds__(kColsPerBlock* kWarp)
    IntGatheredNarrowKernel(GatheredMatMul m, ActRows x) {
  AwaitPriorKernels();
  GatheredColumnsNarrow<F, NarrowColumns<F>()>(m, x);
}

// Two launch bounds: the 256-element formats hold several raw blocks per lane in flight, and
// ptxas, left free, gives them registers for scheduling instead of blocks per SM (3 blocks of 8
// warps for one or two rows, 2 for more, is faster); the 32-element formats need few registers
// and are slower under the same bound, so they keep ptxas's choice.
template <int R>
constexpr int MinBlocksPerSm() {
  return R <= 2 ? 3 : 2;
}

template <class F, int R>
__global__ void __launch_bounds__(kColsPerBlock* kWarp)
    IntMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk, int64_t n_out,
                    ActRows x, int64_t rows, float* __restrict__ y) {
  MatMulColumn<F, R>(w, row_bytes, nblk, n_out, x, rows, y);
}
template <class F, int R>
__global__ void __launch_bounds__(kColsPerBlock* kWarp, MinBlocksPerSm<R>())
    IntMatMulKernelBounded(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t nblk,
                           int64_t n_out, ActRows x, int64_t rows, float* __restrict__ y) {
  MatMulColumn<F, R>(w, row_bytes, nblk, n_out, x, rows, y);
}

template <class F>
__global__ void __launch_bounds__(kColsPerBlock* kWarp)
    IntGatheredKernel(GatheredMatMul m, ActRows x) {
  AwaitPriorKernels();
  GatheredColumn<F>(m, x);
}
template <class F>
__global__ void __launch_bounds__(kColsPerBlock* kWarp, MinBlocksPerSm<1>())
    IntGatheredKernelBounded(GatheredMatMul m, ActRows x) {
  AwaitPriorKernels();
  GatheredColumn<F>(m, x);
}

// The kernel of each form for format F (only that one is instantiated).
template <class F, int R>
constexpr auto MatMulKernelFor() {
  if constexpr (F::kElems == 256)
    return IntMatMulKernelBounded<F, R>;
  else
    return IntMatMulKernel<F, R>;
}
template <class F>
constexpr auto GatheredKernelFor() {
  if constexpr (F::kElems == 256)
    return IntGatheredKernelBounded<F>;
  else
    return IntGatheredKernel<F>;
}

// Whether the one- and two-row GEMVs of the 256-element formats take StagedActKernel:
// LOCKSTEP_CUDA_GEMV=regs keeps the register kernel, for A/B timing (the same bits either way).
bool StagedGemvOn() {
  static const bool on = [] {
    const char* env = std::getenv("LOCKSTEP_CUDA_GEMV");
    return !(env && std::strcmp(env, "regs") == 0);
  }();
  return on;
}

// The device's shared memory for one block (0 before sm_80: no cp.async, no staged kernel).
int StagedSmemLimit() {
  int device = 0, major = 0, optin = 0;
  LS_CUDA_CHECK(cudaGetDevice(&device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return major >= 8 ? optin : 0;
}

// StagedActKernel (matmul_int_staged.cuh) for 256-element formats and one or two rows where the
// rows fit the device's shared memory; false where it does not apply.
template <class F, int R>
bool LaunchStaged(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const ActRows& x,
                  int64_t rows, float* y, cudaStream_t stream) {
  if constexpr (F::kElems != 256 || R > 2) {
    return false;
  } else {
    if (!StagedGemvOn()) return false;
    const int64_t nblk = k / F::kElems, smem = StagedActBytes(R, k);
    const int limit = StagedSmemLimit();
    if (smem > limit) return false;
    constexpr auto kernel = StagedActKernel<F, R>;
    // Set on every launch (cheap), as the other kernels do: one process may drive several
    // devices.
    if (smem > 48 * 1024)
      LS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    const dim3 grid(CeilDiv(n_out, kColsPerBlock), CeilDiv(rows, R));
    kernel<<<grid, kColsPerBlock * kWarp, smem, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                          nblk, n_out, x, rows, y);
    LS_CUDA_LAUNCHED();
    return true;
  }
}

template <class F, int R>
void LaunchRows(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const ActRows& x,
                int64_t rows, float* y, cudaStream_t stream) {
  if (LaunchStaged<F, R>(w, row_bytes, k, n_out, x, rows, y, stream)) return;
  const dim3 grid(CeilDiv(n_out, kColsPerBlock), CeilDiv(rows, R));
  constexpr auto kernel = MatMulKernelFor<F, R>();
  kernel<<<grid, kColsPerBlock * kWarp, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                     k / F::kElems, n_out, x, rows, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool HasIntegerPath(DType t) {
  return DispatchIntFormat(t, [](auto) {});
}

size_t IntActivationBytes(DType t, int64_t rows, int64_t k) {
  size_t bytes = 0;
  DispatchIntFormat(t, [&](auto f) { bytes = ActLayout(decltype(f)::kElems, rows, k).total(); });
  return bytes;
}

size_t ActivationBytes(int block, int64_t rows, int64_t k) {
  return block == 0 ? 0 : ActLayout(block, rows, k).total();
}

int IntActivationBlock(DType t) {
  int elems = 0;
  DispatchIntFormat(t, [&](auto f) { elems = decltype(f)::kElems; });
  return elems;
}

ActRows QuantizeActivations(DType type, const float* x, int64_t rows, int64_t k, void* act,
                            cudaStream_t stream) {
  ActRows xq{};
  const bool ok = DispatchIntFormat(type, [&](auto f) {
    using F = decltype(f);
    LS_CUDA_REQUIRE(k % F::kElems == 0, "cuda matmul: %lld columns of type %d",
                    static_cast<long long>(k), static_cast<int>(type));
    xq = rows == 0 ? ActLayout(F::kElems, rows, k).View(act, k)
                   : QuantizeRows<F>(x, rows, k, act, stream);
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: type %d is not on the integer path", static_cast<int>(type));
  return xq;
}

void LaunchIntMatMulQuantized(DType type, const void* w, int64_t row_bytes, int64_t n_out,
                              const ActRows& xq, int64_t rows, float* y, float* split,
                              cudaStream_t stream) {
  if (rows == 0 || n_out == 0) return;
  const int64_t k = xq.k;
  const bool ok = DispatchIntFormat(type, [&](auto f) {
    using F = decltype(f);
    // Tensor cores where the device has them: the same bits, weights read once per 32 rows.
    if (DenseTakesIntMma(type, rows, n_out) &&
        LaunchIntMma(type, w, row_bytes, k, n_out, xq, rows, y, split, stream))
      return;
    // Narrower instantiations for fewer rows: the same per-row arithmetic, fewer registers.
    if (rows == 1)
      LaunchRows<F, 1>(w, row_bytes, k, n_out, xq, rows, y, stream);
    else if (rows == 2)
      LaunchRows<F, 2>(w, row_bytes, k, n_out, xq, rows, y, stream);
    else if (rows <= 4)
      LaunchRows<F, 4>(w, row_bytes, k, n_out, xq, rows, y, stream);
    else
      LaunchRows<F, kMaxRows>(w, row_bytes, k, n_out, xq, rows, y, stream);
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: type %d is not on the integer path", static_cast<int>(type));
}

void LaunchIntMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const float* x, int64_t rows, float* y, void* act, cudaStream_t stream) {
  if (rows == 0 || n_out == 0) return;
  const ActRows xq = QuantizeActivations(type, x, rows, k, act, stream);
  LaunchIntMatMulQuantized(type, w, row_bytes, n_out, xq, rows, y, nullptr, stream);
}

void LaunchIntGatheredMatMul(const GatheredMatMul& m, void* act, cudaStream_t stream) {
  if (m.tasks == 0 || m.n_out == 0) return;
  LS_CUDA_REQUIRE(m.tasks <= 65535 && m.x_div > 0, "cuda matmul: %lld tasks",
                  static_cast<long long>(m.tasks));
  const bool ok = DispatchIntFormat(m.type, [&](auto f) {
    using F = decltype(f);
    LS_CUDA_REQUIRE(m.k % F::kElems == 0, "cuda matmul: %lld columns of type %d",
                    static_cast<long long>(m.k), static_cast<int>(m.type));
    const int64_t x_rows = (m.tasks + m.x_div - 1) / m.x_div;
    const ActRows xq = m.xq ? *m.xq : QuantizeRows<F>(m.x, x_rows, m.k, act, stream);
    if (m.tiles && m.tasks >= kMmaMinRows &&
        LaunchIntMmaGrouped(m, m.n_expert, xq, m.tiles, stream))
      return;
    if constexpr (F::kElems == 32) {
      if (IsNarrow<F>(m.k / F::kElems) && UnverifiedKernelOn("narrow")) {
        constexpr int C = NarrowColumns<F>();
        const dim3 grid(CeilDiv(m.n_out, kColsPerBlock * C), static_cast<unsigned>(m.tasks));
        IntGatheredNarrowKernel<F><<<grid, kColsPerBlock * kWarp, 0, stream>>>(m, xq);
        LS_CUDA_LAUNCHED();
        return;
      }
    }
    const dim3 grid(CeilDiv(m.n_out, kColsPerBlock), static_cast<unsigned>(m.tasks));
    constexpr auto kernel = GatheredKernelFor<F>();
    kernel<<<grid, kColsPerBlock * kWarp, 0, stream>>>(m, xq);
    LS_CUDA_LAUNCHED();
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: type %d is not on the integer path", static_cast<int>(m.type));
}

}  // namespace lockstep::backend::cuda

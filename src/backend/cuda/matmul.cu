// Matmul kernels over GGUF block formats: one warp per output column, each lane decoding whole
// 32-element chunks and applying them to up to kMaxRows activation rows (one weight read serves
// them all) staged in shared memory, then one fixed butterfly per output. Batch invariance is by
// construction: a row's arithmetic is the same in every instantiation (explicit fmaf, no
// contraction, same order).
#include "backend/cuda/common.cuh"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/quant_blocks.cuh"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxRows = 8;
// The chunked kernels' blocks: 16 warps, one output column each, share one staged copy of x.
constexpr int kTiledWarps = 16;
// x is staged in shared memory one stripe at a time: the U x 32 chunks the 32 lanes take next
// (lane l: chunks l, l + 32, ... of the stripe, so its chunks stay in ascending order whatever
// U is). A chunk's 32 floats sit 36 floats apart, so the 8 lanes of a 16-byte load phase, which
// read consecutive chunks, hit 8 different bank groups (no conflicts); global reads coalesce.
// U > 1 puts more weight loads in flight between two barriers (compact formats need it).
constexpr int kChunkStride = kChunk + 4;
constexpr int kStripeFloats = kWarp * kChunkStride;  // per row and per U
// Chunks per lane per stripe, by rows per block: shared memory stays at 18 KB (36 KB at 8 rows).
constexpr int StripeUnroll(int rows) {
  return rows == 1 ? 4 : rows == 2 ? 2 : 1;
}
// Blocks per multiprocessor the compiler must fit (caps registers at 64 for 1-2 rows).
constexpr int MinBlocks(int rows) {
  return rows <= 2 ? 2 : 1;
}

// acc = fma chain over the 32 decoded weights and one row's 32 activations, in element order.
__device__ __forceinline__ float ChunkDot(const float* v, const float* x, float acc) {
  const float4* xp = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 xv = xp[i];
    acc = fmaf(v[4 * i], xv.x, acc);
    acc = fmaf(v[4 * i + 1], xv.y, acc);
    acc = fmaf(v[4 * i + 2], xv.z, acc);
    acc = fmaf(v[4 * i + 3], xv.w, acc);
  }
  return acc;
}

// Copies chunks [c0, c0 + n) of `nr` rows of x (row stride k) into the stripe buffer
// xs[r][chunk][kChunkStride] (rows `row_floats` apart), with all threads of the block; the
// caller syncs around it.
__device__ __forceinline__ void StageStripe(const float* __restrict__ x, int64_t k, int nr,
                                            int64_t c0, int n, int row_floats, float* xs) {
  const int per_row = n * (kChunk / 4);
  for (int i = threadIdx.x; i < nr * per_row; i += blockDim.x) {
    const int r = i / per_row, c = (i % per_row) / (kChunk / 4), q = i % (kChunk / 4);
    const float4 v = reinterpret_cast<const float4*>(x + r * k + (c0 + c) * kChunk)[q];
    *reinterpret_cast<float4*>(xs + r * row_floats + c * kChunkStride + 4 * q) = v;
  }
}

// One warp per output column, R activation rows per block: lane l decodes chunks l, l + 32, ...
// of the column's weight row in ascending order, each applied to every row (one weight read
// serves them all). The order of a row's additions is that alone, whatever R or the grid.
template <class F, int R>
__global__ void __launch_bounds__(kTiledWarps* kWarp, MinBlocks(R))
    MatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_chunks, int64_t n_out,
                 const float* __restrict__ x, int64_t rows, float* __restrict__ y) {
  AwaitPriorKernels();
  constexpr int U = StripeUnroll(R), kRowFloats = U * kStripeFloats;
  __shared__ __align__(16) float xs[R * kRowFloats];
  const int lane = threadIdx.x % kWarp;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTiledWarps + threadIdx.x / kWarp;
  const bool active = col < n_out;  // inactive warps still help stage x and sync
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), rows - r0));
  const int64_t k = n_chunks * kChunk;
  const uint8_t* wrow = w + (active ? col : 0) * row_bytes;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += U * kWarp) {
    const int n = static_cast<int>(min(static_cast<int64_t>(U * kWarp), n_chunks - c0));
    __syncthreads();  // the previous stripe is consumed
    StageStripe(x + r0 * k, k, nr, c0, n, kRowFloats, xs);
    __syncthreads();
    if (!active) continue;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = u * kWarp + lane;
      if (c >= n) break;
      float v[kChunk];
      DecodeChunk<F>(wrow, c0 + c, v);
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < nr) acc[r] = ChunkDot(v, xs + r * kRowFloats + c * kChunkStride, acc[r]);
    }
  }
  if (!active) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0 && r < nr) y[(r0 + r) * n_out + col] = s;
  }
}

// Tasks with their own weight rows (MoE experts, listed rows): one block per (task, 16
// columns), the task's x row staged as above; the same per-lane order as MatMulKernel.
template <class F>
__global__ void __launch_bounds__(kTiledWarps* kWarp, MinBlocks(1))
    GatheredKernel(GatheredMatMul m) {
  AwaitPriorKernels();
  __shared__ __align__(16) float xs[kStripeFloats];
  const int lane = threadIdx.x % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTiledWarps + threadIdx.x / kWarp;
  const int64_t t = blockIdx.y;
  const bool active = j < m.n_out;
  const int64_t n_chunks = m.k / kChunk;
  int64_t wr = !active ? 0 : m.ids ? m.ids[t * m.n_out + j] : j;
  if (m.experts) wr += static_cast<int64_t>(m.experts[t]) * m.rows_per_expert;
  const uint8_t* wrow = static_cast<const uint8_t*>(m.w) + wr * m.row_bytes;
  const float* xrow = m.x + (t / m.x_div) * m.k;
  float acc = 0.0f;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += kWarp) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kWarp), n_chunks - c0));
    __syncthreads();
    StageStripe(xrow, m.k, 1, c0, n, kStripeFloats, xs);
    __syncthreads();
    if (!active || lane >= n) continue;
    float v[kChunk];
    DecodeChunk<F>(wrow, c0 + lane, v);
    acc = ChunkDot(v, xs + lane * kChunkStride, acc);
  }
  if (!active) return;
  const float s = WarpSum(acc);
  if (lane == 0) m.y[t * m.n_out + j] = s;
}

// Float rows of any length (small models' per-layer projections have 16 columns): lane l sums
// elements l, l + 32, ... in ascending order, then the butterfly; the GatheredKernel's tasks.
template <class F>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) AnyLengthKernel(GatheredMatMul m) {
  AwaitPriorKernels();
  const int lane = threadIdx.x % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t t = blockIdx.y;
  if (j >= m.n_out) return;
  int64_t wr = m.ids ? m.ids[t * m.n_out + j] : j;
  if (m.experts) wr += static_cast<int64_t>(m.experts[t]) * m.rows_per_expert;
  const uint8_t* wrow = static_cast<const uint8_t*>(m.w) + wr * m.row_bytes;
  const float* xrow = m.x + (t / m.x_div) * m.k;
  float acc = 0.0f;
  for (int64_t i = lane; i < m.k; i += kWarp) acc = fmaf(F::Elem(wrow, i), xrow[i], acc);
  const float s = WarpSum(acc);
  if (lane == 0) m.y[t * m.n_out + j] = s;
}

template <class F>
__global__ void GetRowsAnyLengthKernel(const uint8_t* __restrict__ table, int64_t row_bytes,
                                       int64_t k, const int32_t* __restrict__ ids, float scale,
                                       float* __restrict__ y) {
  AwaitPriorKernels();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.y;
  if (i < k) y[r * k + i] = F::Elem(table + static_cast<int64_t>(ids[r]) * row_bytes, i) * scale;
}

template <class F>
__global__ void GetRowsKernel(const uint8_t* __restrict__ table, int64_t row_bytes,
                              int64_t n_chunks, const int32_t* __restrict__ ids, float scale,
                              float* __restrict__ y) {
  AwaitPriorKernels();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.y;
  if (c >= n_chunks) return;
  float v[kChunk];
  DecodeChunk<F>(table + static_cast<int64_t>(ids[r]) * row_bytes, c, v);
  float* out = y + r * n_chunks * kChunk + c * kChunk;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) out[i] = v[i] * scale;
}

template <class F, int R>
void LaunchRows(const void* w, int64_t row_bytes, int64_t k, int64_t n_out, const float* x,
                int64_t rows, float* y, cudaStream_t stream) {
  const dim3 grid(CeilDiv(n_out, kTiledWarps), CeilDiv(rows, R));
  MatMulKernel<F, R><<<grid, kTiledWarps * kWarp, 0, stream>>>(
      static_cast<const uint8_t*>(w), row_bytes, k / kChunk, n_out, x, rows, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool HasNativeFormat(DType t) {
  return DispatchFormat(t, [](auto) {});
}

void LaunchMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                  const float* x, int64_t rows, float* y, void* act, cudaStream_t stream) {
  if (HasIntegerPath(type))
    LaunchIntMatMul(type, w, row_bytes, k, n_out, x, rows, y, act, stream);
  else
    LaunchFloatMatMul(type, w, row_bytes, k, n_out, x, rows, y, stream);
}

void LaunchFloatMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                       const float* x, int64_t rows, float* y, cudaStream_t stream) {
  if (rows == 0 || n_out == 0) return;
  if (k % kChunk != 0) {  // float rows of any length: one task per activation row
    LaunchGatheredMatMul({type, w, row_bytes, k, n_out, x, 1, nullptr, nullptr, 0, rows, y},
                         stream);
    return;
  }
  const bool ok = DispatchFormat(type, [&](auto f) {
    using F = decltype(f);
    // Fewer rows than a group: a narrower instantiation (same per-row arithmetic, fewer
    // registers); more: groups of kMaxRows, each reading the weights once.
    if (rows == 1)
      LaunchRows<F, 1>(w, row_bytes, k, n_out, x, rows, y, stream);
    else if (rows == 2)
      LaunchRows<F, 2>(w, row_bytes, k, n_out, x, rows, y, stream);
    else if (rows <= 4)
      LaunchRows<F, 4>(w, row_bytes, k, n_out, x, rows, y, stream);
    else
      LaunchRows<F, kMaxRows>(w, row_bytes, k, n_out, x, rows, y, stream);
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: no kernel for type %d", static_cast<int>(type));
}

void LaunchGatheredMatMul(const GatheredMatMul& m, cudaStream_t stream) {
  if (m.tasks == 0 || m.n_out == 0) return;
  LS_CUDA_REQUIRE(m.tasks <= 65535 && m.x_div > 0, "cuda matmul: %lld tasks",
                  static_cast<long long>(m.tasks));
  if (HasIntegerPath(m.type)) {
    LaunchIntGatheredMatMul(m, m.act, stream);
    return;
  }
  const dim3 grid(CeilDiv(m.n_out, kWarpsPerBlock), static_cast<unsigned>(m.tasks));
  if (m.k % kChunk != 0) {
    const bool ok = DispatchFloatFormat(m.type, [&](auto f) {
      AnyLengthKernel<decltype(f)><<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(m);
      LS_CUDA_LAUNCHED();
    });
    LS_CUDA_REQUIRE(ok, "cuda matmul: %lld columns of type %d is not a multiple of 32",
                    static_cast<long long>(m.k), static_cast<int>(m.type));
    return;
  }
  const bool ok = DispatchFormat(m.type, [&](auto f) {
    const dim3 tiled_grid(CeilDiv(m.n_out, kTiledWarps), static_cast<unsigned>(m.tasks));
    GatheredKernel<decltype(f)><<<tiled_grid, kTiledWarps * kWarp, 0, stream>>>(m);
    LS_CUDA_LAUNCHED();
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: no kernel for type %d", static_cast<int>(m.type));
}

void LaunchGetRows(DType type, const void* table, int64_t row_bytes, int64_t k, const int32_t* ids,
                   int64_t rows, float scale, float* y, cudaStream_t stream) {
  if (rows == 0) return;
  if (k % kChunk != 0) {
    const bool ok = DispatchFloatFormat(type, [&](auto f) {
      constexpr int kThreads = 128;
      const dim3 grid(CeilDiv(k, kThreads), static_cast<unsigned>(rows));
      GetRowsAnyLengthKernel<decltype(f)><<<grid, kThreads, 0, stream>>>(
          static_cast<const uint8_t*>(table), row_bytes, k, ids, scale, y);
      LS_CUDA_LAUNCHED();
    });
    LS_CUDA_REQUIRE(ok, "cuda get_rows: %lld columns of type %d is not a multiple of 32",
                    static_cast<long long>(k), static_cast<int>(type));
    return;
  }
  const bool ok = DispatchFormat(type, [&](auto f) {
    using F = decltype(f);
    constexpr int kThreads = 128;
    const dim3 grid(CeilDiv(k / kChunk, kThreads), static_cast<unsigned>(rows));
    GetRowsKernel<F><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table), row_bytes,
                                                    k / kChunk, ids, scale, y);
    LS_CUDA_LAUNCHED();
  });
  LS_CUDA_REQUIRE(ok, "cuda get_rows: no kernel for type %d", static_cast<int>(type));
}

}  // namespace lockstep::backend::cuda

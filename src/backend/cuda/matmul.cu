// Matmul kernels over GGUF block formats: one warp per output column, each lane decoding whole
// 32-element chunks and applying them to up to kMaxRows activation rows (one weight read serves
// them all), then one fixed butterfly per output. Batch invariance is by construction: a row's
// arithmetic is the same in every instantiation (explicit fmaf, no contraction, same order).
#include "backend/cuda/common.cuh"
#include "backend/cuda/matmul.h"
#include "backend/cuda/quant_blocks.cuh"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxRows = 8;

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

template <class F, int R>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    MatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_chunks,
                 int64_t n_out, const float* __restrict__ x, int64_t rows,
                 float* __restrict__ y) {
  const int lane = threadIdx.x % kWarp;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (col >= n_out) return;  // the whole warp leaves together
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), rows - r0));
  const int64_t k = n_chunks * kChunk;
  const uint8_t* wrow = w + col * row_bytes;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t c = lane; c < n_chunks; c += kWarp) {
    float v[kChunk];
    DecodeChunk<F>(wrow, c, v);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < nr) acc[r] = ChunkDot(v, x + (r0 + r) * k + c * kChunk, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0 && r < nr) y[(r0 + r) * n_out + col] = s;
  }
}

template <class F>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp) GatheredKernel(GatheredMatMul m) {
  const int lane = threadIdx.x % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t t = blockIdx.y;
  if (j >= m.n_out) return;
  const int64_t n_chunks = m.k / kChunk;
  int64_t wr = m.ids ? m.ids[t * m.n_out + j] : j;
  if (m.experts) wr += static_cast<int64_t>(m.experts[t]) * m.rows_per_expert;
  const uint8_t* wrow = static_cast<const uint8_t*>(m.w) + wr * m.row_bytes;
  const float* xrow = m.x + (t / m.x_div) * m.k;
  float acc = 0.0f;
  for (int64_t c = lane; c < n_chunks; c += kWarp) {
    float v[kChunk];
    DecodeChunk<F>(wrow, c, v);
    acc = ChunkDot(v, xrow + c * kChunk, acc);
  }
  const float s = WarpSum(acc);
  if (lane == 0) m.y[t * m.n_out + j] = s;
}

template <class F>
__global__ void GetRowsKernel(const uint8_t* __restrict__ table, int64_t row_bytes,
                              int64_t n_chunks, const int32_t* __restrict__ ids, float scale,
                              float* __restrict__ y) {
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
  const dim3 grid(CeilDiv(n_out, kWarpsPerBlock), CeilDiv(rows, R));
  MatMulKernel<F, R><<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(
      static_cast<const uint8_t*>(w), row_bytes, k / kChunk, n_out, x, rows, y);
  LS_CUDA_LAUNCHED();
}

}  // namespace

bool HasNativeFormat(DType t) {
  return DispatchFormat(t, [](auto) {});
}

void LaunchMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                  const float* x, int64_t rows, float* y, cudaStream_t stream) {
  LS_CUDA_REQUIRE(k % kChunk == 0, "cuda matmul: %lld columns is not a multiple of 32",
                  static_cast<long long>(k));
  if (rows == 0 || n_out == 0) return;
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
  LS_CUDA_REQUIRE(m.k % kChunk == 0, "cuda matmul: %lld columns is not a multiple of 32",
                  static_cast<long long>(m.k));
  if (m.tasks == 0 || m.n_out == 0) return;
  LS_CUDA_REQUIRE(m.tasks <= 65535 && m.x_div > 0, "cuda matmul: %lld tasks",
                  static_cast<long long>(m.tasks));
  const bool ok = DispatchFormat(m.type, [&](auto f) {
    using F = decltype(f);
    const dim3 grid(CeilDiv(m.n_out, kWarpsPerBlock), static_cast<unsigned>(m.tasks));
    GatheredKernel<F><<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(m);
    LS_CUDA_LAUNCHED();
  });
  LS_CUDA_REQUIRE(ok, "cuda matmul: no kernel for type %d", static_cast<int>(m.type));
}

void LaunchGetRows(DType type, const void* table, int64_t row_bytes, int64_t k,
                   const int32_t* ids, int64_t rows, float scale, float* y, cudaStream_t stream) {
  LS_CUDA_REQUIRE(k % kChunk == 0, "cuda get_rows: %lld columns is not a multiple of 32",
                  static_cast<long long>(k));
  if (rows == 0) return;
  const bool ok = DispatchFormat(type, [&](auto f) {
    using F = decltype(f);
    constexpr int kThreads = 128;
    const dim3 grid(CeilDiv(k / kChunk, kThreads), static_cast<unsigned>(rows));
    GetRowsKernel<F><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table),
                                                     row_bytes, k / kChunk, ids, scale, y);
    LS_CUDA_LAUNCHED();
  });
  LS_CUDA_REQUIRE(ok, "cuda get_rows: no kernel for type %d", static_cast<int>(type));
}

}  // namespace lockstep::backend::cuda

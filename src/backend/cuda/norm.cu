// RMSNorm: one warp per (row, group) for head-sized groups, one block per row for whole rows;
// either way the sum of squares runs in an order fixed by the group length alone, the same for
// any number of rows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/norm.h"

namespace lockstep::backend::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void RmsNormKernel(const float* x, const float* w, float eps, int64_t group,
                              float extra_scale, const float* residual, int64_t items, float* y) {
  AwaitPriorKernels();
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (item >= items) return;
  const float* xg = x + item * group;
  float* yg = y + item * group;
  const float* rg = residual ? residual + item * group : nullptr;
  float ss = 0.0f;
  // Unrolled so that a lane's loads are in flight together (one warp reads a whole row: the
  // loop would otherwise wait on memory once per element); the fmaf chain keeps its order.
#pragma unroll 8
  for (int64_t i = lane; i < group; i += kWarp) ss = fmaf(xg[i], xg[i], ss);
  ss = WarpSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(group) + eps);
#pragma unroll 8
  for (int64_t i = lane; i < group; i += kWarp) {
    float v = xg[i] * inv;
    if (w) v *= w[i];
    v = v * extra_scale;
    yg[i] = rg ? v + rg[i] : v;
  }
}

// Long groups (a whole row of 1024 or more): one block of kRowThreads per group, thread t
// summing elements t, t + kRowThreads, ... (a fmaf chain), the butterfly per warp, then the
// warp sums in ascending warp order. The order depends on the group length alone. kPer > 0:
// the thread's kPer elements and weights are loaded into registers at once (one memory latency
// instead of one per unrolled batch; a single block per row is latency-bound); 0: streamed.
constexpr int kRowThreads = 256;
constexpr int64_t kLongGroup = 1024;

// Up to three outputs of one row: y[o] = x * inv * w[o] * scale[o] (w[o] may be null), each by
// the single-output expression, so a fused launch gives each output the bits of its own.
struct RowOuts {
  const float* w[3];
  float scale[3];
  float* y[3];
  // Each output's quantized copy (NormQuant): block 0, 32 or 256, the levels, scales and
  // 16-level sums of row 0 (row r's at r * cols, r * cols / block, r * cols / 16).
  int qblock[3];
  int8_t* q[3];
  float* qd[3];
  int16_t* qsum[3];
};

// quant::PrepareRow's block quantization of a value s whose block maximum of |s| is amax (the
// QuantizeRowsKernel expressions): the block scale and s's level.
__device__ __forceinline__ float QuantScale(float amax) {
  return __fdiv_rn(amax, 127.0f);
}
__device__ __forceinline__ int8_t QuantLevel(float s, float scale) {
  const float inv = scale != 0.0f ? __fdiv_rn(1.0f, scale) : 0.0f;
  return static_cast<int8_t>(RoundHalfAway(__fmul_rn(s, inv)));
}

// kQuant: some output writes a quantized copy (NormQuant). The plain instantiation compiles
// without the quantization branches and their shared array: with them, a decode step's
// whole-row norms ran about 2.5x longer even with every copy off (session 14, H100).
template <int kPer, int kOuts, bool kQuant>
__global__ void __launch_bounds__(kRowThreads)
    RmsNormRowKernel(const float* x, float eps, int64_t group, RowOuts outs,
                     const float* residual) {
  AwaitPriorKernels();
  __shared__ float warp_sums[kRowThreads / kWarp];
  // Per 256-value quantization block, each warp's maximum of |y| (blocks of 256 quantize only
  // with the row in registers).
  __shared__ float block_max[kQuant && kPer > 0 ? kPer : 1][kRowThreads / kWarp];
  const int64_t row = blockIdx.x;
  const float* xg = x + row * group;
  const float* rg = residual ? residual + row * group : nullptr;
  // Every output's weights are loaded with x: one memory latency for the whole row.
  float xv[kPer > 0 ? kPer : 1], wv[kOuts][kPer > 0 ? kPer : 1];
  float ss = 0.0f;
  if constexpr (kPer > 0) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
      xv[j] = i < group ? xg[i] : 0.0f;
#pragma unroll
      for (int o = 0; o < kOuts; ++o) wv[o][j] = outs.w[o] && i < group ? outs.w[o][i] : 1.0f;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (threadIdx.x + static_cast<int64_t>(j) * kRowThreads < group) ss = fmaf(xv[j], xv[j], ss);
  } else {
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < group; i += kRowThreads) ss = fmaf(xg[i], xg[i], ss);
  }
  ss = WarpSum(ss);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowThreads / kWarp; ++i) total += warp_sums[i];
  const float inv = 1.0f / sqrtf(total / static_cast<float>(group) + eps);
#pragma unroll
  for (int o = 0; o < kOuts; ++o) {
    const float* wo = outs.w[o];
    const float scale = outs.scale[o];
    float* yg = outs.y[o] + row * group;
    if constexpr (kPer > 0) {
      // The value output o stores at element j of this thread (the unfused expression).
      const auto value = [&](int j, int64_t i) {
        float v = xv[j] * inv;
        if (wo) v *= wv[o][j];
        v = v * scale;
        return rg ? v + rg[i] : v;
      };
      const int qblock = kQuant ? outs.qblock[o] : 0;
      const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
      if (qblock == 256) {
        // Block j is element j of every thread: each warp's maximum of |y|, then (after the
        // barrier) the block's, the 8 maxima in any order (a maximum is exact).
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
          if (static_cast<int64_t>(j) * kRowThreads >= group) break;  // uniform: whole blocks
          const float m = WarpMax(fmaxf(0.0f, fabsf(value(j, i))));
          if (lane == 0) block_max[j][warp] = m;
        }
        __syncthreads();
      }
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
        if (i >= group) break;  // uniform over a warp: group is a multiple of 32
        const float s = value(j, i);
        yg[i] = s;
        if (qblock == 32) {  // block i / 32 is this warp's element j
          const float d = QuantScale(WarpMax(fmaxf(0.0f, fabsf(s))));
          outs.q[o][row * group + i] = QuantLevel(s, d);
          if (lane == 0) outs.qd[o][row * (group / 32) + i / 32] = d;
        } else if (qblock == 256) {
          float amax = 0.0f;
#pragma unroll
          for (int w = 0; w < kRowThreads / kWarp; ++w) amax = fmaxf(amax, block_max[j][w]);
          const float d = QuantScale(amax);
          const int8_t level = QuantLevel(s, d);
          outs.q[o][row * group + i] = level;
          if (threadIdx.x == 0) outs.qd[o][row * (group / 256) + j] = d;
          // The 16 levels of group i / 16 are lanes 0-15 or 16-31 of this warp (exact sums).
          int sum = level;
#pragma unroll
          for (int off = 1; off < 16; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
          if (lane % 16 == 0) outs.qsum[o][row * (group / 16) + i / 16] = static_cast<int16_t>(sum);
        }
      }
      if (qblock == 256) __syncthreads();  // block_max is reused by the next output
    } else {
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < group; i += kRowThreads) {
        float v = xg[i] * inv;
        if (wo) v *= wo[i];
        v = v * scale;
        yg[i] = rg ? v + rg[i] : v;
      }
    }
  }
}

template <int kOuts, bool kQuant>
void LaunchRowAs(const float* x, float eps, int64_t group, const RowOuts& outs,
                 const float* residual, unsigned blocks, cudaStream_t stream) {
  // Same per-thread order in every variant: only how many loads are in flight differs.
  if (group <= 8 * kRowThreads)
    RmsNormRowKernel<8, kOuts, kQuant>
        <<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
  else if (group <= 24 * kRowThreads)
    RmsNormRowKernel<24, kOuts, kQuant>
        <<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
  else
    RmsNormRowKernel<0, kOuts, kQuant>
        <<<blocks, kRowThreads, 0, stream>>>(x, eps, group, outs, residual);
}

template <int kOuts>
void LaunchRow(const float* x, float eps, int64_t group, const RowOuts& outs, const float* residual,
               int64_t items, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(items);
  bool quant = false;
  for (int o = 0; o < kOuts; ++o) quant = quant || outs.qblock[o] != 0;
  if (quant)
    LaunchRowAs<kOuts, true>(x, eps, group, outs, residual, blocks, stream);
  else
    LaunchRowAs<kOuts, false>(x, eps, group, outs, residual, blocks, stream);
}

// The sum of one thread's squares, the butterfly per warp, the warp sums in warp order: the
// whole-row kernel's order, for two rows at once (one barrier). sums: 2 x 8 shared floats.
template <int kPer>
__device__ __forceinline__ float2 RowSquares2(const float (&u)[kPer], const float (&v)[kPer],
                                              int64_t group, float (*sums)[kRowThreads / kWarp]) {
  float su = 0.0f, sv = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (threadIdx.x + static_cast<int64_t>(j) * kRowThreads < group)
      su = fmaf(u[j], u[j], su), sv = fmaf(v[j], v[j], sv);
  su = WarpSum(su), sv = WarpSum(sv);
  if (threadIdx.x % kWarp == 0)
    sums[0][threadIdx.x / kWarp] = su, sums[1][threadIdx.x / kWarp] = sv;
  __syncthreads();
  float2 total = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kRowThreads / kWarp; ++i) total.x += sums[0][i], total.y += sums[1][i];
  return total;
}

// Backend::RmsNormSumNormAdd for rows of 1,024 to kPer * 256 values: one block per row, every
// value in registers, each step the unfused kernels' expression (the sum's norm reads the sum
// as RmsNormRowKernel would read it from memory).
template <int kPer>
__global__ void __launch_bounds__(kRowThreads)
    NormSumNormAddKernel(const float* a, const float* wa, const float* b, const float* wb,
                         const float* w, float eps, int64_t group, const float* residual,
                         float* y) {
  AwaitPriorKernels();
  __shared__ float sums[2][kRowThreads / kWarp];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * group;
  float av[kPer], bv[kPer], wav[kPer], wbv[kPer], wv[kPer], rv[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
    const bool in = i < group;
    av[j] = in ? a[off + i] : 0.0f, bv[j] = in ? b[off + i] : 0.0f;
    wav[j] = wa && in ? wa[i] : 1.0f, wbv[j] = wb && in ? wb[i] : 1.0f;
    wv[j] = w && in ? w[i] : 1.0f, rv[j] = in ? residual[off + i] : 0.0f;
  }
  const float2 ss = RowSquares2<kPer>(av, bv, group, sums);
  const float n = static_cast<float>(group);
  const float inv_a = 1.0f / sqrtf(ss.x / n + eps), inv_b = 1.0f / sqrtf(ss.y / n + eps);
  float sv[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    float va = av[j] * inv_a;
    if (wa) va *= wav[j];
    va = va * 1.0f;
    float vb = bv[j] * inv_b;
    if (wb) vb *= wbv[j];
    vb = vb * 1.0f;
    sv[j] = vb + va;  // RmsNormAdd(b, wb, residual: a's norm)
  }
  __syncthreads();  // sums is reused
  const float s_total = RowSquares2<kPer>(sv, sv, group, sums).x;
  const float inv = 1.0f / sqrtf(s_total / n + eps);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kRowThreads;
    if (i >= group) break;
    float v = sv[j] * inv;
    if (w) v *= wv[j];
    v = v * 1.0f;
    y[off + i] = v + rv[j];
  }
}

}  // namespace

void LaunchRmsNorm(const float* x, const float* w, float eps, int64_t group, float extra_scale,
                   int64_t rows, int64_t cols, float* y, cudaStream_t stream,
                   const float* residual) {
  LS_CUDA_REQUIRE(group > 0 && cols % group == 0, "cuda rms_norm: group %lld of %lld columns",
                  static_cast<long long>(group), static_cast<long long>(cols));
  const int64_t items = rows * (cols / group);
  if (items == 0) return;
  if (group >= kLongGroup) {
    LS_CUDA_REQUIRE(items <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(items));
    RowOuts ro{};
    ro.w[0] = w, ro.scale[0] = extra_scale, ro.y[0] = y;
    LaunchRow<1>(x, eps, group, ro, residual, items, stream);
  } else {
    RmsNormKernel<<<CeilDiv(items, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, stream>>>(
        x, w, eps, group, extra_scale, residual, items, y);
  }
  LS_CUDA_LAUNCHED();
}

bool CanQuantizeInNorm(int64_t cols, int block) {
  return (block == 32 || block == 256) && cols >= kLongGroup && cols <= 24 * kRowThreads &&
         cols % block == 0;
}

bool LaunchRmsNorms(const float* x, float eps, int64_t rows, int64_t cols,
                    std::span<const RmsNormOut> outs, cudaStream_t stream) {
  if (cols < kLongGroup || outs.empty() || outs.size() > 3) return false;
  LS_CUDA_REQUIRE(rows <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(rows));
  if (rows == 0) return true;
  RowOuts ro{};
  for (size_t o = 0; o < outs.size(); ++o) {
    ro.w[o] = outs[o].w, ro.scale[o] = outs[o].extra_scale, ro.y[o] = outs[o].y;
    const NormQuant& nq = outs[o].quant;
    if (nq.block == 0) continue;
    LS_CUDA_REQUIRE(CanQuantizeInNorm(cols, nq.block) && nq.act,
                    "cuda rms_norm: no quantized copy of %lld columns in blocks of %d",
                    static_cast<long long>(cols), nq.block);
    const ActLayout lay(nq.block, rows, cols);
    ro.qblock[o] = nq.block, ro.q[o] = lay.Q(nq.act), ro.qd[o] = lay.D(nq.act);
    ro.qsum[o] = lay.Bsum(nq.act);
  }
  if (outs.size() == 1)
    LaunchRow<1>(x, eps, cols, ro, nullptr, rows, stream);
  else if (outs.size() == 2)
    LaunchRow<2>(x, eps, cols, ro, nullptr, rows, stream);
  else
    LaunchRow<3>(x, eps, cols, ro, nullptr, rows, stream);
  LS_CUDA_LAUNCHED();
  return true;
}

bool LaunchRmsNormSumNormAdd(const float* a, const float* wa, const float* b, const float* wb,
                             const float* w, float eps, int64_t rows, int64_t cols,
                             const float* residual, float* y, cudaStream_t stream) {
  if (cols < kLongGroup || cols > 24 * kRowThreads) return false;
  LS_CUDA_REQUIRE(rows <= 0x7fffffff, "cuda rms_norm: %lld rows", static_cast<long long>(rows));
  if (rows == 0) return true;
  const auto blocks = static_cast<unsigned>(rows);
  if (cols <= 12 * kRowThreads)
    NormSumNormAddKernel<12>
        <<<blocks, kRowThreads, 0, stream>>>(a, wa, b, wb, w, eps, cols, residual, y);
  else
    NormSumNormAddKernel<24>
        <<<blocks, kRowThreads, 0, stream>>>(a, wa, b, wb, w, eps, cols, residual, y);
  LS_CUDA_LAUNCHED();
  return true;
}

}  // namespace lockstep::backend::cuda

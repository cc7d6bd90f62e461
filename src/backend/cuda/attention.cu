// KV writes and attention. A query row is one block per head whose warps split the keys at fixed
// positions (segments of 32, dealt round-robin to 8 warps): each score a per-lane fmaf chain over
// the head's dims and the fixed butterfly, folded into an online softmax in ascending position,
// the warps' states merged in warp order. Nothing depends on which other rows share the launch
// or where the cache keeps a key (ring slot or paged block).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention.h"
#include "backend/cuda/common.cuh"

namespace lockstep::backend::cuda {
namespace {

__device__ __forceinline__ int64_t KvRow(const KvLayerView& kv, int seq, int pos) {
  if (kv.ring > 0) return static_cast<int64_t>(seq) * kv.ring + pos % kv.ring;
  const int32_t b = kv.table[static_cast<int64_t>(seq) * kv.table_stride + pos / kv.block];
  return b < 0 ? -1 : static_cast<int64_t>(b) * kv.block + pos % kv.block;
}

__device__ __forceinline__ float LoadElem(const void* base, DType t, int64_t i) {
  if (t == DType::F32) return static_cast<const float*>(base)[i];
  if (t == DType::F16) return __half2float(static_cast<const __half*>(base)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}

__device__ __forceinline__ void StoreElem(void* base, DType t, int64_t i, float v) {
  if (t == DType::F32)
    static_cast<float*>(base)[i] = v;
  else if (t == DType::F16)
    static_cast<__half*>(base)[i] = __float2half_rn(v);
  else
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

__global__ void KvWriteKernel(KvLayerView kv, const float* k, const float* v, const int32_t* pos,
                              const int32_t* seq, int64_t rows) {
  const int64_t width = kv.k_width + kv.v_width;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * width;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / width, c = t % width;
    const int64_t dst = KvRow(kv, seq[r], pos[r]);
    if (dst < 0) __trap();  // PrepareWrite was not called: a caller bug, never silent
    if (c < kv.k_width)
      StoreElem(kv.k, kv.type_k, dst * kv.k_width + c, k[r * kv.k_width + c]);
    else
      StoreElem(kv.v, kv.type_v, dst * kv.v_width + (c - kv.k_width),
                v[r * kv.v_width + (c - kv.k_width)]);
  }
}

// Keys whose K rows a warp loads together.
constexpr int kKeys = 8;
// The split of a query's keys: position t belongs to warp (t / kSegment) % kSplitWarps of the
// (row, head) block. Fixed by positions alone, so a query's partial sums are the same whatever
// else the launch carries.
constexpr int kSplitWarps = 8;
constexpr int kSegment = 32;

// One warp's online softmax over keys [a, b] in ascending order, groups of kKeys: the group's K
// loads and scores first (memory latency paid once per group), then the folds, each exactly as
// one key at a time would compute it.
template <int kDims>
__device__ __forceinline__ void FoldKeys(const KvLayerView& kv, int s, int64_t col, int head_dim,
                                         const float* qv, int a, int b, float& m, float& l,
                                         float* acc) {
  const int lane = threadIdx.x % kWarp;
  for (int t0 = a; t0 <= b; t0 += kKeys) {
    float score[kKeys];
    int64_t vbase[kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      const int t = min(t0 + j, b);  // past the end: a repeat, never folded in
      const int64_t row = KvRow(kv, s, t);
      vbase[j] = row * kv.v_width + col;
      const int64_t kbase = row * kv.k_width + col;
      float part = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = lane + kWarp * i;
        if (d < head_dim) part = fmaf(qv[i], LoadElem(kv.k, kv.type_k, kbase + d), part);
      }
      score[j] = WarpSum(part);
    }
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      if (t0 + j > b) break;
      const float m_new = fmaxf(m, score[j]);
      const float corr = expf(m - m_new);
      const float pr = expf(score[j] - m_new);
      l = l * corr + pr;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = lane + kWarp * i;
        if (d < head_dim) acc[i] = acc[i] * corr + pr * LoadElem(kv.v, kv.type_v, vbase[j] + d);
      }
      m = m_new;
    }
  }
}

// One block of kSplitWarps warps per (query row, head). Warp w folds the key segments
// w, w + 8, ... of the query's range (segments of 32 positions); the warps' partial softmax
// states are then merged in ascending warp order. kDims: register slots per lane
// (head_dim <= 32 * kDims).
template <int kDims>
__global__ void __launch_bounds__(kSplitWarps* kWarp)
    AttentionKernel(const float* q, KvLayerView kv, int n_head, int group, int head_dim, int window,
                    bool include_self, const int32_t* pos, const int32_t* seq, float* out) {
  __shared__ float part_m[kSplitWarps], part_l[kSplitWarps];
  __shared__ float part_acc[kSplitWarps][kDims * kWarp];
  const int64_t r = blockIdx.x / n_head;
  const int h = static_cast<int>(blockIdx.x % n_head);
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp;
  const int64_t col = static_cast<int64_t>(h / group) * head_dim;
  const int s = seq[r], p_row = pos[r];
  const int lo = window > 0 ? max(0, p_row - window + 1) : 0;
  const int last = include_self ? p_row : p_row - 1;
  const float* qh =
      q + r * static_cast<int64_t>(n_head) * head_dim + static_cast<int64_t>(h) * head_dim;
  float qv[kDims], acc[kDims];
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const int d = lane + kWarp * i;
    qv[i] = d < head_dim ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  if (last >= lo) {
    for (int seg = lo / kSegment; seg <= last / kSegment; ++seg) {
      if (seg % kSplitWarps != w) continue;
      FoldKeys<kDims>(kv, s, col, head_dim, qv, max(lo, seg * kSegment),
                      min(last, seg * kSegment + kSegment - 1), m, l, acc);
    }
  }
  if (lane == 0) part_m[w] = m, part_l[w] = l;
#pragma unroll
  for (int i = 0; i < kDims; ++i) part_acc[w][lane + kWarp * i] = acc[i];
  __syncthreads();
  // Merge in warp order: warps without keys hold m = -inf, l = 0 and add nothing.
  float m_all = -INFINITY;
#pragma unroll
  for (int v = 0; v < kSplitWarps; ++v) m_all = fmaxf(m_all, part_m[v]);
  float scale[kSplitWarps], l_all = 0.0f;
#pragma unroll
  for (int v = 0; v < kSplitWarps; ++v) {
    scale[v] = part_l[v] > 0.0f ? expf(part_m[v] - m_all) : 0.0f;
    l_all = l_all + part_l[v] * scale[v];
  }
  float* o = out + r * static_cast<int64_t>(n_head) * head_dim + static_cast<int64_t>(h) * head_dim;
  const float inv = 1.0f / l_all;
  for (int d = threadIdx.x; d < head_dim; d += kSplitWarps * kWarp) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kSplitWarps; ++v) sum = sum + part_acc[v][d] * scale[v];
    o[d] = sum * inv;
  }
}

template <int kDims>
void Launch(const float* q, const KvLayerView& kv, int n_head, int group, int head_dim, int window,
            bool include_self, const int32_t* pos, const int32_t* seq, int64_t rows, float* out,
            cudaStream_t stream) {
  const int64_t blocks = rows * n_head;
  LS_CUDA_REQUIRE(blocks <= 0x7fffffff, "cuda attention: %lld rows", static_cast<long long>(rows));
  AttentionKernel<kDims><<<static_cast<unsigned>(blocks), kSplitWarps * kWarp, 0, stream>>>(
      q, kv, n_head, group, head_dim, window, include_self, pos, seq, out);
  LS_CUDA_LAUNCHED();
}

}  // namespace

void LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, const int32_t* pos,
                   const int32_t* seq, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t n = rows * (kv.k_width + kv.v_width);
  constexpr int kThreads = 256;
  KvWriteKernel<<<CeilDiv(n, kThreads), kThreads, 0, stream>>>(kv, k, v, pos, seq, rows);
  LS_CUDA_LAUNCHED();
}

void LaunchAttention(const float* q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                     int window, bool include_self, const int32_t* pos, const int32_t* seq,
                     int64_t rows, float* out, cudaStream_t stream) {
  LS_CUDA_REQUIRE(n_head_kv > 0 && n_head % n_head_kv == 0 && head_dim > 0,
                  "cuda attention: %d heads, %d kv heads, head_dim %d", n_head, n_head_kv,
                  head_dim);
  if (rows == 0) return;
  const int group = n_head / n_head_kv;
  const int slots = CeilDiv(head_dim, kWarp);
  if (slots <= 1)
    Launch<1>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, stream);
  else if (slots <= 2)
    Launch<2>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, stream);
  else if (slots <= 4)
    Launch<4>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, stream);
  else if (slots <= 8)
    Launch<8>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, stream);
  else {
    LS_CUDA_REQUIRE(slots <= 16, "cuda attention: head_dim %d above 512", head_dim);
    Launch<16>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, stream);
  }
}

}  // namespace lockstep::backend::cuda

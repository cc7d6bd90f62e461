// KV writes and attention. A query's keys are split at fixed positions: segment s of 32
// positions belongs to slot s % 64, slot j to split j % 8 and, within it, to place j / 8. Each
// slot is one warp's online softmax in ascending position (per-lane fmaf chains over the head's
// dims and the fixed butterfly), a split merges its slots in place order, the query merges its
// splits in split order, always with the same merge arithmetic. Few queries take a block per
// (query, split) and a merge kernel; many take a block per query whose warp x plays split x: the
// same bits. Nothing depends on which other rows share the launch or where the cache keeps a key
// (ring slot or paged block).
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

// Keys whose K and V rows a warp loads together (fewer for wide heads, whose loads fill more
// registers). The grouping decides only when a key's loads are issued, never how it is folded.
template <int kDims>
constexpr int KeysPerLoad() {
  return kDims <= 8 ? 8 : 4;
}
// The whole-query kernel runs two blocks per multiprocessor for heads up to 256 (prefill has
// queries enough to fill them), so its warps load fewer keys at a time to stay within 128
// registers; wider heads would spill there and keep one block.
template <int kDims>
constexpr int WholeKeysPerLoad() {
  return kDims <= 8 ? 4 : 2;
}
template <int kDims>
constexpr int WholeBlocksPerSm() {
  return kDims <= 8 ? 2 : 1;
}
// The split of a query's keys, fixed by positions alone: segment s (positions [32 s, 32 s + 32))
// belongs to block s % kSplitBlocks of the query's (row, head) blocks and, within it, to warp
// (s / kSplitBlocks) % kSplitWarps. Each warp folds its segments in ascending position, a block
// merges its warps' states in warp order, and the merge kernel merges the blocks' states in
// block order. Nothing depends on the rows or heads sharing the launch, or on the context length
// (blocks and warps without keys hold the empty state and add nothing).
constexpr int kSplitBlocks = 8;
constexpr int kSplitWarps = 8;
constexpr int kSegment = 32;

// One warp's online softmax over keys [a, b] in ascending order: each group's K and V loads are
// issued together (memory latency paid once per group), then its scores, then the folds, each
// exactly as one key at a time would compute it.
template <int kDims, int kKeys>
__device__ __forceinline__ void FoldKeys(const KvLayerView& kv, int s, int64_t col, int head_dim,
                                         const float* qv, int a, int b, float& m, float& l,
                                         float* acc) {
  const int lane = threadIdx.x % kWarp;
  for (int t0 = a; t0 <= b; t0 += kKeys) {
    float kval[kKeys][kDims], vval[kKeys][kDims];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      const int64_t row = KvRow(kv, s, min(t0 + j, b));  // past the end: a repeat, never folded
      const int64_t kbase = row * kv.k_width + col, vbase = row * kv.v_width + col;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = lane + kWarp * i;
        kval[j][i] = d < head_dim ? LoadElem(kv.k, kv.type_k, kbase + d) : 0.0f;
        vval[j][i] = d < head_dim ? LoadElem(kv.v, kv.type_v, vbase + d) : 0.0f;
      }
    }
    float score[kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      float part = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i)
        if (lane + kWarp * i < head_dim) part = fmaf(qv[i], kval[j][i], part);
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
      for (int i = 0; i < kDims; ++i)
        if (lane + kWarp * i < head_dim) acc[i] = acc[i] * corr + pr * vval[j][i];
      m = m_new;
    }
  }
}

// A split's softmax state, as the merge reads it: max, sum, then head_dim accumulator values
// (all relative to the max).
__host__ __device__ constexpr int64_t PartialFloats(int head_dim) {
  return 2 + head_dim;
}

// The one merge of softmax states (a running state with a new one, in a fixed order): every path
// uses it with explicit roundings, so contraction never differs between kernels. A state with
// l = 0 (no keys) gets scale 0: merged into a state it changes nothing, merged with another
// empty one it stays empty.
struct MergeScales {
  float m, l, run, next;
};
__device__ __forceinline__ MergeScales Merge(float m_run, float l_run, float m_next, float l_next) {
  const float m = fmaxf(m_run, m_next);
  const float run = l_run > 0.0f ? expf(m_run - m) : 0.0f;
  const float next = l_next > 0.0f ? expf(m_next - m) : 0.0f;
  return {m, __fadd_rn(__fmul_rn(l_run, run), __fmul_rn(l_next, next)), run, next};
}
__device__ __forceinline__ float MergeAcc(float acc_run, float acc_next, const MergeScales& s) {
  return __fadd_rn(__fmul_rn(acc_run, s.run), __fmul_rn(acc_next, s.next));
}

// The fold of slot (split, v) of a query: its segments (those congruent to the slot modulo the
// kSplitBlocks * kSplitWarps slots) in ascending order, by one warp, from the empty state.
template <int kDims, int kKeys>
__device__ __forceinline__ void FoldSlot(const KvLayerView& kv, int s, int64_t col, int head_dim,
                                         const float* qv, int lo, int last, int slot, float& m,
                                         float& l, float* acc) {
  m = -INFINITY, l = 0.0f;
#pragma unroll
  for (int i = 0; i < kDims; ++i) acc[i] = 0.0f;
  if (last < lo) return;
  constexpr int kSlots = kSplitBlocks * kSplitWarps;
  const int seg0 = lo / kSegment;
  for (int seg = seg0 + ((slot - seg0) % kSlots + kSlots) % kSlots; seg <= last / kSegment;
       seg += kSlots)
    FoldKeys<kDims, kKeys>(kv, s, col, head_dim, qv, max(lo, seg * kSegment),
                           min(last, seg * kSegment + kSegment - 1), m, l, acc);
}

// What a query (row, head) `rh` needs to fold its slots: sequence, key range, kv column, and
// this lane's query values.
struct QueryKeys {
  int seq, lo, last;
  int64_t col;
};
template <int kDims>
__device__ __forceinline__ QueryKeys LoadQuery(const float* q, int n_head, int group, int head_dim,
                                               int window, bool include_self, const int32_t* pos,
                                               const int32_t* seq, int64_t rh, float* qv) {
  const int64_t r = rh / n_head;
  const int h = static_cast<int>(rh % n_head);
  const int lane = threadIdx.x % kWarp;
  const int p_row = pos[r];
  const float* qh = q + rh * head_dim;
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const int d = lane + kWarp * i;
    qv[i] = d < head_dim ? qh[d] : 0.0f;
  }
  return {seq[r], window > 0 ? max(0, p_row - window + 1) : 0, include_self ? p_row : p_row - 1,
          static_cast<int64_t>(h / group) * head_dim};
}

// The kSplitBlocks split states at p (PartialFloats apart) merged in split order, the
// accumulator divided by the total sum, into out[0 .. head_dim): thread `tid` of `threads` writes
// d = tid, tid + threads, ... (each d's arithmetic is the same for any thread count).
__device__ __forceinline__ void MergeSplits(const float* p, int head_dim, float* out, int tid,
                                            int threads) {
  const int64_t stride = PartialFloats(head_dim);
  MergeScales scales[kSplitBlocks];
  float m = -INFINITY, l = 0.0f;
#pragma unroll
  for (int b = 0; b < kSplitBlocks; ++b) {
    scales[b] = Merge(m, l, p[b * stride], p[b * stride + 1]);
    m = scales[b].m, l = scales[b].l;
  }
  const float inv = 1.0f / l;
  for (int d = tid; d < head_dim; d += threads) {
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < kSplitBlocks; ++b) acc = MergeAcc(acc, p[b * stride + 2 + d], scales[b]);
    out[d] = acc * inv;
  }
}

// Few queries (decode, verify): one block per (query, split), warp v folding slot (split, v); the
// slots' states are merged in warp order into the split's state for the merge kernel, so a
// single query's keys spread over kSplitBlocks multiprocessors.
template <int kDims>
__global__ void __launch_bounds__(kSplitWarps* kWarp)
    AttentionSplitKernel(const float* q, KvLayerView kv, int n_head, int group, int head_dim,
                         int window, bool include_self, const int32_t* pos, const int32_t* seq,
                         float* partials) {
  __shared__ float part_m[kSplitWarps], part_l[kSplitWarps];
  __shared__ float part_acc[kSplitWarps][kDims * kWarp];
  const int64_t rh = blockIdx.x / kSplitBlocks;
  const int split = static_cast<int>(blockIdx.x % kSplitBlocks);
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp;
  float qv[kDims], acc[kDims], m, l;
  const QueryKeys k =
      LoadQuery<kDims>(q, n_head, group, head_dim, window, include_self, pos, seq, rh, qv);
  FoldSlot<kDims, KeysPerLoad<kDims>()>(kv, k.seq, k.col, head_dim, qv, k.lo, k.last,
                                        split + kSplitBlocks * w, m, l, acc);
  if (lane == 0) part_m[w] = m, part_l[w] = l;
#pragma unroll
  for (int i = 0; i < kDims; ++i) part_acc[w][lane + kWarp * i] = acc[i];
  __syncthreads();
  MergeScales scales[kSplitWarps];
  float m_run = -INFINITY, l_run = 0.0f;
#pragma unroll
  for (int v = 0; v < kSplitWarps; ++v) {
    scales[v] = Merge(m_run, l_run, part_m[v], part_l[v]);
    m_run = scales[v].m, l_run = scales[v].l;
  }
  float* o = partials + blockIdx.x * PartialFloats(head_dim);
  if (threadIdx.x == 0) o[0] = m_run, o[1] = l_run;
  for (int d = threadIdx.x; d < head_dim; d += kSplitWarps * kWarp) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kSplitWarps; ++v) sum = MergeAcc(sum, part_acc[v][d], scales[v]);
    o[2 + d] = sum;
  }
}

// Many queries (prefill): one block per query, warp x playing split x: it folds the split's
// slots one after another and merges each into its running state as it finishes (the split
// kernel's warp-order merge, the same arithmetic), then the block merges the splits. The same
// bits as the split kernels without kSplitBlocks times the blocks, and every warp busy.
template <int kDims>
__global__ void __launch_bounds__(kSplitWarps* kWarp, WholeBlocksPerSm<kDims>())
    AttentionWholeKernel(const float* q, KvLayerView kv, int n_head, int group, int head_dim,
                         int window, bool include_self, const int32_t* pos, const int32_t* seq,
                         float* out) {
  static_assert(kSplitWarps == kSplitBlocks, "warp x of a whole block plays split x");
  __shared__ float splits[kSplitBlocks * PartialFloats(kDims * kWarp)];
  const int lane = threadIdx.x % kWarp, split = threadIdx.x / kWarp;
  float qv[kDims], acc[kDims], run[kDims], m, l, m_run = -INFINITY, l_run = 0.0f;
  const QueryKeys k =
      LoadQuery<kDims>(q, n_head, group, head_dim, window, include_self, pos, seq, blockIdx.x, qv);
#pragma unroll
  for (int i = 0; i < kDims; ++i) run[i] = 0.0f;
  for (int v = 0; v < kSplitWarps; ++v) {
    FoldSlot<kDims, WholeKeysPerLoad<kDims>()>(kv, k.seq, k.col, head_dim, qv, k.lo, k.last,
                                               split + kSplitBlocks * v, m, l, acc);
    const MergeScales s = Merge(m_run, l_run, m, l);
    m_run = s.m, l_run = s.l;
#pragma unroll
    for (int i = 0; i < kDims; ++i) run[i] = MergeAcc(run[i], acc[i], s);
  }
  float* o = splits + split * PartialFloats(head_dim);
  if (lane == 0) o[0] = m_run, o[1] = l_run;
#pragma unroll
  for (int i = 0; i < kDims; ++i)
    if (lane + kWarp * i < head_dim) o[2 + lane + kWarp * i] = run[i];
  __syncthreads();
  MergeSplits(splits, head_dim, out + static_cast<int64_t>(blockIdx.x) * head_dim, threadIdx.x,
              kSplitWarps * kWarp);
}

// One block per (row, head): the kSplitBlocks partial states merged in split order.
constexpr int kMergeThreads = 128;
__global__ void __launch_bounds__(kMergeThreads)
    MergeKernel(const float* partials, int head_dim, float* out) {
  MergeSplits(partials + static_cast<int64_t>(blockIdx.x) * kSplitBlocks * PartialFloats(head_dim),
              head_dim, out + static_cast<int64_t>(blockIdx.x) * head_dim, threadIdx.x,
              kMergeThreads);
}

// Queries per launch from which each query takes one block (the splits then fill the GPU).
constexpr int64_t kWholeFromQueries = 256;

template <int kDims>
void Launch(const float* q, const KvLayerView& kv, int n_head, int group, int head_dim, int window,
            bool include_self, const int32_t* pos, const int32_t* seq, int64_t rows, float* out,
            float* partials, cudaStream_t stream) {
  const int64_t queries = rows * n_head;
  LS_CUDA_REQUIRE(queries * kSplitBlocks <= 0x7fffffff, "cuda attention: %lld rows",
                  static_cast<long long>(rows));
  if (queries >= kWholeFromQueries) {
    AttentionWholeKernel<kDims><<<static_cast<unsigned>(queries), kSplitWarps * kWarp, 0, stream>>>(
        q, kv, n_head, group, head_dim, window, include_self, pos, seq, out);
    LS_CUDA_LAUNCHED();
    return;
  }
  AttentionSplitKernel<kDims>
      <<<static_cast<unsigned>(queries * kSplitBlocks), kSplitWarps * kWarp, 0, stream>>>(
          q, kv, n_head, group, head_dim, window, include_self, pos, seq, partials);
  LS_CUDA_LAUNCHED();
  MergeKernel<<<static_cast<unsigned>(queries), kMergeThreads, 0, stream>>>(partials, head_dim,
                                                                            out);
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

size_t AttentionScratchBytes(int64_t rows, int n_head, int head_dim) {
  if (rows * n_head >= kWholeFromQueries) return 0;  // the whole kernel keeps them in shared memory
  return static_cast<size_t>(rows * n_head * kSplitBlocks * PartialFloats(head_dim)) *
         sizeof(float);
}

void LaunchAttention(const float* q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                     int window, bool include_self, const int32_t* pos, const int32_t* seq,
                     int64_t rows, float* out, void* scratch, cudaStream_t stream) {
  LS_CUDA_REQUIRE(n_head_kv > 0 && n_head % n_head_kv == 0 && head_dim > 0,
                  "cuda attention: %d heads, %d kv heads, head_dim %d", n_head, n_head_kv,
                  head_dim);
  if (rows == 0) return;
  const int group = n_head / n_head_kv;
  const int slots = CeilDiv(head_dim, kWarp);
  float* partials = static_cast<float*>(scratch);
  if (slots <= 1)
    Launch<1>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, partials,
              stream);
  else if (slots <= 2)
    Launch<2>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, partials,
              stream);
  else if (slots <= 4)
    Launch<4>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, partials,
              stream);
  else if (slots <= 8)
    Launch<8>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, partials,
              stream);
  else {
    LS_CUDA_REQUIRE(slots <= 16, "cuda attention: head_dim %d above 512", head_dim);
    Launch<16>(q, kv, n_head, group, head_dim, window, include_self, pos, seq, rows, out, partials,
               stream);
  }
}

}  // namespace lockstep::backend::cuda

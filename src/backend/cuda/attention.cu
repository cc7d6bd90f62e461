// KV writes and attention. A query's keys are cut into blocks of 32 positions; block b belongs
// to split b % 32. A tile of up to 16 query rows of one KV head folds a split's blocks in
// ascending order with tensor cores (attention_fold.cuh), and a query merges its 32 split states
// in split order. Launches of few tiles (decode, verify) take a block per (tile, split) and a
// merge kernel; launches of many (prefill) a block per tile that folds the splits one after
// another and merges as it goes: the same arithmetic, so the same bits. Nothing depends on which
// other rows share the launch or the tile, or where the cache keeps a key (ring slot or paged
// block).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_fold.cuh"
#include "backend/cuda/common.cuh"

namespace lockstep::backend::cuda {
namespace {

using attention::kSplits;

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
  AwaitPriorKernels();
  const int64_t width = kv.k_width + kv.v_width;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * width;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / width, c = t % width;
    const int64_t dst = attention::KvRowOf(kv, seq[r], pos[r]);
    if (dst < 0) __trap();  // PrepareWrite was not called: a caller bug, never silent
    if (c < kv.k_width)
      StoreElem(kv.k, kv.type_k, dst * kv.k_width + c, k[r * kv.k_width + c]);
    else
      StoreElem(kv.v, kv.type_v, dst * kv.v_width + (c - kv.k_width),
                v[r * kv.v_width + (c - kv.k_width)]);
  }
}

// A split's softmax state, as the merge reads it: max, sum, then head_dim accumulator values
// (all relative to the max).
__host__ __device__ constexpr int64_t PartialFloats(int head_dim) {
  return 2 + head_dim;
}

// The one merge of softmax states (a running state with a new one, in a fixed order): every path
// uses it with explicit roundings, so contraction never differs between kernels. Every path
// skips a state with l = 0 (a split that holds none of the query's keys), so empty splits
// change nothing, not even a zero's sign.
struct MergeScales {
  float m, l, run, next;
};
__device__ __forceinline__ MergeScales Merge(float m_run, float l_run, float m_next, float l_next) {
  const float m = fmaxf(m_run, m_next);
  const float run = l_run > 0.0f ? expf(m_run - m) : 0.0f;
  const float next = expf(m_next - m);
  return {m, __fadd_rn(__fmul_rn(l_run, run), __fmul_rn(l_next, next)), run, next};
}
__device__ __forceinline__ float MergeAcc(float acc_run, float acc_next, const MergeScales& s) {
  return __fadd_rn(__fmul_rn(acc_run, s.run), __fmul_rn(acc_next, s.next));
}

// The tiles of a launch: tile x = (token group, kv head, head chunk), token group major. A tile
// holds `tokens` consecutive rows of `heads` query heads of its KV group each (chunk c: heads
// [c heads, c heads + heads) of the group); M-row i is token i / heads, head i % heads.
struct TileShape {
  int n_head, group, heads, chunks, tokens;
};

// What the block's threads share about the tile's 16 M-rows (query < 0: no query).
struct TileRows {
  int64_t query[attention::kTileRows];
  int seq[attention::kTileRows], lo[attention::kTileRows], last[attention::kTileRows];
};

// M-row facts of tile `tile` into shared memory (visible to every thread on return).
__device__ void LoadRows(const TileShape& ts, int window, bool include_self, const int32_t* pos,
                         const int32_t* seq, int64_t rows, int64_t tile, TileRows& tr) {
  const int64_t n_kv = ts.n_head / ts.group;
  const int chunk = static_cast<int>(tile % ts.chunks);
  const int kvh = static_cast<int>(tile / ts.chunks % n_kv);
  const int64_t token0 = tile / ts.chunks / n_kv * ts.tokens;
  if (threadIdx.x < attention::kTileRows) {
    const int i = threadIdx.x;
    const int64_t r = token0 + i / ts.heads;
    const int hg = chunk * ts.heads + i % ts.heads;
    const bool ok = i < ts.tokens * ts.heads && r < rows && hg < ts.group;
    tr.query[i] = ok ? r * ts.n_head + kvh * ts.group + hg : -1;
    const int p = ok ? pos[r] : 0;
    tr.seq[i] = ok ? seq[r] : -1;
    tr.lo[i] = window > 0 ? max(0, p - window + 1) : 0;
    tr.last[i] = include_self ? p : p - 1;
  }
  __syncthreads();
}

// The query tile (zeros past head_dim and for absent rows) and zeros in the K and V tiles'
// padding (dims the loads never write), visible after the fold's first barrier. With `vec`
// (q 16-byte aligned, head_dim a multiple of 4) four dims a load.
template <int kDimTiles>
__device__ void LoadQueries(const float* q, const TileRows& tr, int head_dim, bool vec,
                            char* smem) {
  using L = attention::TileLayout<kDimTiles>;
  float* qs = reinterpret_cast<float*>(smem + L::kQ);
  if (vec) {
    constexpr int kQuads = L::kDims / 4;
#pragma unroll
    for (int i = threadIdx.x; i < attention::kTileRows * kQuads; i += attention::kThreads) {
      const int row = i / kQuads, d = i % kQuads * 4;
      const int64_t query = tr.query[row];
      *reinterpret_cast<float4*>(qs + row * L::kQStride + d) =
          query >= 0 && d < head_dim ? *reinterpret_cast<const float4*>(q + query * head_dim + d)
                                     : float4{};
    }
  } else {
#pragma unroll 8
    for (int i = threadIdx.x; i < attention::kTileRows * L::kDims; i += attention::kThreads) {
      const int row = i / L::kDims, d = i % L::kDims;
      qs[row * L::kQStride + d] =
          tr.query[row] >= 0 && d < head_dim ? q[tr.query[row] * head_dim + d] : 0.0f;
    }
  }
  float* ks = reinterpret_cast<float*>(smem + L::kK);
  float* vs = reinterpret_cast<float*>(smem + L::kV);
  const int pad = L::kDims - head_dim;
  for (int i = threadIdx.x; i < attention::kBlockKeys * pad; i += attention::kThreads) {
    const int key = i / pad, d = head_dim + i % pad;
    ks[key * L::kKStride + d] = 0.0f;
    vs[key * L::kVStride + d] = 0.0f;
  }
}

// One pass of a tile: the rows of the first sequence not yet done (every thread computes the
// same from shared memory). Returns false when every row is done.
struct Pass {
  int seq, lo, last;
  unsigned rows;  // bit i: M-row i belongs to the pass
};
__device__ __forceinline__ bool NextPass(const TileRows& tr, unsigned done, Pass& pass) {
  pass = {-1, 0x7fffffff, -1, 0u};
  for (int i = 0; i < attention::kTileRows; ++i) {
    if (tr.query[i] < 0 || (done >> i & 1u)) continue;
    if (pass.seq < 0) pass.seq = tr.seq[i];
    if (tr.seq[i] != pass.seq) continue;
    pass.rows |= 1u << i;
    pass.lo = min(pass.lo, tr.lo[i]);
    pass.last = max(pass.last, tr.last[i]);
  }
  return pass.seq >= 0;
}

__device__ __forceinline__ attention::RowPair RowsOf(const TileRows& tr, const Pass& pass) {
  const int g = threadIdx.x % kWarp / 4;
  attention::RowPair rp;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = g + 8 * r;
    rp.active[r] = pass.rows >> i & 1u;
    rp.lo[r] = tr.lo[i], rp.last[r] = tr.last[i];
  }
  return rp;
}

// The dim of accumulator fragment (n, c) of this thread (see attention::FoldState).
template <int kDimTiles>
__device__ __forceinline__ int FragmentDim(int n, int c) {
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp;
  return 8 * (kDimTiles * w + n) + 2 * (lane % 4) + c;
}

// Few tiles: block (tile, split) folds the split and writes each row's state for the merge
// kernel, one query's keys spread over kSplits multiprocessors. A split that holds none of the
// tile's keys writes empty states without reading anything else.
template <int kDimTiles>
__global__ void __launch_bounds__(attention::kThreads)
    AttentionSplitKernel(const float* q, KvLayerView kv, TileShape ts, int head_dim, int window,
                         bool include_self, bool vec, const int32_t* pos, const int32_t* seq,
                         int64_t rows, float* partials) {
  AwaitPriorKernels();
  extern __shared__ __align__(16) char smem[];
  __shared__ TileRows tr;
  LoadRows(ts, window, include_self, pos, seq, rows, blockIdx.x, tr);
  const int split = static_cast<int>(blockIdx.y);
  bool any_keys = false;
  for (int i = 0; i < attention::kTileRows; ++i)
    any_keys |= tr.query[i] >= 0 && attention::SplitHasKeys(split, tr.lo[i], tr.last[i]);
  if (any_keys) LoadQueries<kDimTiles>(q, tr, head_dim, vec, smem);
  const int64_t col =
      static_cast<int64_t>(blockIdx.x / ts.chunks % (ts.n_head / ts.group)) * head_dim;
  const int g = threadIdx.x % kWarp / 4;
  Pass pass;
  attention::FoldState<kDimTiles> st;
  for (unsigned done = 0; NextPass(tr, done, pass); done |= pass.rows) {
    const attention::RowPair rp = RowsOf(tr, pass);
    if (any_keys)
      attention::FoldSplit<kDimTiles, true>(smem, kv, pass.seq, col, head_dim, vec, split, pass.lo,
                                            pass.last, rp, st);
    else
      st.Clear();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (!rp.active[r]) continue;
      float* o = partials + (tr.query[g + 8 * r] * kSplits + split) * PartialFloats(head_dim);
      if (threadIdx.x % 4 == 0 && threadIdx.x < kWarp) o[0] = st.m[r], o[1] = st.l[r];
      if (st.l[r] == 0.0f) continue;  // the merge skips an empty state's accumulator
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          if (const int d = FragmentDim<kDimTiles>(n, c); d < head_dim)
            o[2 + d] = st.o[n][2 * r + c];
    }
  }
}

// Many tiles: block `tile` folds the splits one after another and merges each into the rows'
// running state as it finishes (MergeKernel's arithmetic in the same order), then writes them.
template <int kDimTiles>
__global__ void __launch_bounds__(attention::kThreads)
    AttentionWholeKernel(const float* q, KvLayerView kv, TileShape ts, int head_dim, int window,
                         bool include_self, bool vec, const int32_t* pos, const int32_t* seq,
                         int64_t rows, float* out) {
  AwaitPriorKernels();
  using L = attention::TileLayout<kDimTiles>;
  extern __shared__ __align__(16) char smem[];
  __shared__ TileRows tr;
  LoadRows(ts, window, include_self, pos, seq, rows, blockIdx.x, tr);
  LoadQueries<kDimTiles>(q, tr, head_dim, vec, smem);
  float* run = reinterpret_cast<float*>(smem + L::kRun);  // each thread its fragments' values
  const int64_t col =
      static_cast<int64_t>(blockIdx.x / ts.chunks % (ts.n_head / ts.group)) * head_dim;
  const int g = threadIdx.x % kWarp / 4;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) run[(g + 8 * r) * L::kDims + FragmentDim<kDimTiles>(n, c)] = 0.0f;
  Pass pass;
  attention::FoldState<kDimTiles> st;
  for (unsigned done = 0; NextPass(tr, done, pass); done |= pass.rows) {
    const attention::RowPair rp = RowsOf(tr, pass);
    for (int split = 0; split < kSplits; ++split) {
      attention::FoldSplit<kDimTiles, false>(smem, kv, pass.seq, col, head_dim, vec, split, pass.lo,
                                             pass.last, rp, st);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (!rp.active[r] || st.l[r] == 0.0f) continue;
        const MergeScales s = Merge(m_run[r], l_run[r], st.m[r], st.l[r]);
        m_run[r] = s.m, l_run[r] = s.l;
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float& acc = run[(g + 8 * r) * L::kDims + FragmentDim<kDimTiles>(n, c)];
            acc = MergeAcc(acc, st.o[n][2 * r + c], s);
          }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t query = tr.query[g + 8 * r];
    if (query < 0) continue;
    const float inv = 1.0f / l_run[r];
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        if (const int d = FragmentDim<kDimTiles>(n, c); d < head_dim)
          out[query * head_dim + d] = run[(g + 8 * r) * L::kDims + d] * inv;
  }
}

// One block per (row, head): the split states (PartialFloats apart) merged in split order, the
// accumulator divided by the total sum. Thread 0 chains the scales; each dim's arithmetic is the
// same whatever thread computes it.
constexpr int kMergeThreads = 128;
__global__ void __launch_bounds__(kMergeThreads)
    MergeKernel(const float* partials, int head_dim, float* out) {
  AwaitPriorKernels();
  static_assert(kSplits <= kMergeThreads);
  __shared__ float m_of[kSplits], l_of[kSplits];
  __shared__ MergeScales scales[kSplits];
  __shared__ float inv;
  const int64_t stride = PartialFloats(head_dim);
  const float* p = partials + static_cast<int64_t>(blockIdx.x) * kSplits * stride;
  if (threadIdx.x < kSplits) {  // every split's max and sum at once, then the chain
    m_of[threadIdx.x] = p[threadIdx.x * stride];
    l_of[threadIdx.x] = p[threadIdx.x * stride + 1];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY, l = 0.0f;
    for (int b = 0; b < kSplits; ++b) {
      if (l_of[b] == 0.0f) continue;
      scales[b] = Merge(m, l, m_of[b], l_of[b]);
      m = scales[b].m, l = scales[b].l;
    }
    inv = 1.0f / l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < head_dim; d += kMergeThreads) {
    float acc = 0.0f;
    for (int b = 0; b < kSplits; ++b)
      if (l_of[b] > 0.0f) acc = MergeAcc(acc, p[b * stride + 2 + d], scales[b]);
    out[static_cast<int64_t>(blockIdx.x) * head_dim + d] = acc * inv;
  }
}

// Tiles of the whole-tile shape from which a block folds all splits of its tile (the tiles then
// fill the GPU); fewer take a block per (tile, split). Either way the same bits.
constexpr int64_t kWholeFromTiles = 256;

// A launch's shape: whole (as many tokens a tile as fit in its 16 M-rows) or split (one token a
// tile), and its number of tiles.
struct LaunchShape {
  bool whole;
  TileShape ts;
  int64_t tiles;
};
LaunchShape ShapeOf(int n_head, int n_head_kv, int64_t rows) {
  TileShape ts;
  ts.n_head = n_head;
  ts.group = n_head / n_head_kv;
  ts.heads = std::min(ts.group, attention::kTileRows);
  ts.chunks = CeilDiv(ts.group, ts.heads);
  const int whole_tokens = attention::kTileRows / ts.heads;
  const int64_t whole_tiles = CeilDiv(rows, whole_tokens) * n_head_kv * ts.chunks;
  const bool whole = whole_tiles >= kWholeFromTiles;
  ts.tokens = whole ? whole_tokens : 1;
  const int64_t tiles = whole ? whole_tiles : rows * n_head_kv * ts.chunks;
  LS_CUDA_REQUIRE(tiles <= 0x7fffffff, "cuda attention: %lld rows", static_cast<long long>(rows));
  return {whole, ts, tiles};
}

// 16-byte loads need every query row and every K and V row, column and head to start on a
// 16-byte boundary (aligned K and V heads make head_dim a multiple of 4, as query rows need).
bool VectorLoads(const float* q, const KvLayerView& kv, int head_dim) {
  auto aligned = [&](const void* base, DType t, int64_t width) {
    const int64_t bytes = t == DType::F32 ? 4 : 2;
    return reinterpret_cast<uintptr_t>(base) % 16 == 0 && (width * bytes) % 16 == 0 &&
           (head_dim * bytes) % 16 == 0;
  };
  return aligned(q, DType::F32, head_dim) && aligned(kv.k, kv.type_k, kv.k_width) &&
         aligned(kv.v, kv.type_v, kv.v_width);
}

template <int kDimTiles>
void Launch(const float* q, const KvLayerView& kv, const LaunchShape& shape, int head_dim,
            int window, bool include_self, const int32_t* pos, const int32_t* seq, int64_t rows,
            float* out, float* partials, cudaStream_t stream) {
  using L = attention::TileLayout<kDimTiles>;
  const bool vec = VectorLoads(q, kv, head_dim);
  const auto tiles = static_cast<unsigned>(shape.tiles);
  if (shape.whole) {
    LS_CUDA_CHECK(cudaFuncSetAttribute(AttentionWholeKernel<kDimTiles>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(L::kWhole)));
    AttentionWholeKernel<kDimTiles><<<tiles, attention::kThreads, L::kWhole, stream>>>(
        q, kv, shape.ts, head_dim, window, include_self, vec, pos, seq, rows, out);
    LS_CUDA_LAUNCHED();
    return;
  }
  LS_CUDA_CHECK(cudaFuncSetAttribute(AttentionSplitKernel<kDimTiles>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(L::kFold)));
  AttentionSplitKernel<kDimTiles><<<dim3(tiles, kSplits), attention::kThreads, L::kFold, stream>>>(
      q, kv, shape.ts, head_dim, window, include_self, vec, pos, seq, rows, partials);
  LS_CUDA_LAUNCHED();
  const int64_t queries = rows * shape.ts.n_head;
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

size_t AttentionScratchBytes(int64_t rows, int n_head, int n_head_kv, int head_dim) {
  if (rows == 0 || ShapeOf(n_head, n_head_kv, rows).whole) return 0;  // states in shared memory
  return static_cast<size_t>(rows * n_head * kSplits * PartialFloats(head_dim)) * sizeof(float);
}

bool AttentionFoldsWholeTiles(int64_t rows, int n_head, int n_head_kv) {
  return ShapeOf(n_head, n_head_kv, rows).whole;
}

void LaunchAttention(const float* q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                     int window, bool include_self, const int32_t* pos, const int32_t* seq,
                     int64_t rows, float* out, void* scratch, cudaStream_t stream) {
  LS_CUDA_REQUIRE(n_head_kv > 0 && n_head % n_head_kv == 0 && head_dim > 0,
                  "cuda attention: %d heads, %d kv heads, head_dim %d", n_head, n_head_kv,
                  head_dim);
  if (rows == 0) return;
  const LaunchShape shape = ShapeOf(n_head, n_head_kv, rows);
  const int dim_tiles = CeilDiv(head_dim, kWarp);
  float* partials = static_cast<float*>(scratch);
  auto launch = [&](auto tiles) {
    Launch<decltype(tiles)::value>(q, kv, shape, head_dim, window, include_self, pos, seq, rows,
                                   out, partials, stream);
  };
  if (dim_tiles <= 1)
    launch(std::integral_constant<int, 1>());
  else if (dim_tiles <= 2)
    launch(std::integral_constant<int, 2>());
  else if (dim_tiles <= 4)
    launch(std::integral_constant<int, 4>());
  else if (dim_tiles <= 8)
    launch(std::integral_constant<int, 8>());
  else {
    LS_CUDA_REQUIRE(dim_tiles <= 16, "cuda attention: head_dim %d above 512", head_dim);
    launch(std::integral_constant<int, 16>());
  }
}

}  // namespace lockstep::backend::cuda

// The tensor-core fold of attention: a tile of up to 16 query rows of one KV head folds one
// split of its keys, block by block, with TF32 MMAs whose operands are split into high and low
// parts (so scores and sums keep about fp32 accuracy). Which keys a split holds and the order of
// every sum depend on key positions and the head's size alone; each query row's arithmetic is
// the same whichever other rows share its tile (an MMA computes each output row from that row's
// operands only), so prefill, verify and decode give a query the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/kv_view.h"

namespace lockstep::backend::cuda::attention {

inline constexpr int kSplits = 32;     // a query's keys: block b belongs to split b % kSplits
inline constexpr int kBlockKeys = 32;  // block b: positions [32 b, 32 b + 32)
inline constexpr int kTileRows = 16;   // query rows of a tile (the MMA's M)
inline constexpr int kWarps = 4;       // warp w scores keys [8 w, 8 w + 8) of a block and owns
inline constexpr int kThreads = kWarps * kWarp;  // a quarter of the head's dims in P x V

// Shared-memory layout of a tile (all floats: the cache's F16 or BF16 values widened), for heads
// padded to 32 kDimTiles dims. Strides are padded so every fragment load of a warp hits 32
// different banks.
template <int kDimTiles>
struct TileLayout {
  static constexpr int kDims = 32 * kDimTiles;
  static constexpr int kQStride = kDims + 4;
  static constexpr int kKStride = kDims + 4;
  static constexpr int kVStride = kDims + 8;
  static constexpr int kPStride = kBlockKeys + 4;
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + sizeof(float) * kTileRows * kQStride;
  static constexpr size_t kV = kK + sizeof(float) * kBlockKeys * kKStride;
  static constexpr size_t kP = kV + sizeof(float) * kBlockKeys * kVStride;
  static constexpr size_t kRed = kP + sizeof(float) * kTileRows * kPStride;  // max, then sums
  static constexpr size_t kRun = kRed + sizeof(float) * 2 * kWarps * kTileRows;
  static constexpr size_t kFold = kRun;                                       // the split kernel's
  static constexpr size_t kWhole = kRun + sizeof(float) * kTileRows * kDims;  // + running sums
};

__device__ __forceinline__ uint32_t Tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // round to nearest, ties away, at 10 fraction bits (what cvt.rna.tf32 does on sm_80)
  const uint32_t u = __float_as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? u : (u + 0x1000u) & 0xffffe000u;
#else
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#endif
}

// d += a x b for one m16n8k8 TF32 tile (fragments as the PTX ISA lays them out). Before sm_80,
// which has no TF32 MMA, the lanes trade operands by shuffles and sum in k order: other bits
// than the tensor cores', but the same for every row and launch on such a device.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int ka = k % 4, hi = k / 4;
    const float a_g = __uint_as_float(__shfl_sync(0xffffffffu, a[2 * hi], g * 4 + ka));
    const float a_g8 = __uint_as_float(__shfl_sync(0xffffffffu, a[2 * hi + 1], g * 4 + ka));
    const float b_0 = __uint_as_float(__shfl_sync(0xffffffffu, b[hi], (2 * t) * 4 + ka));
    const float b_1 = __uint_as_float(__shfl_sync(0xffffffffu, b[hi], (2 * t + 1) * 4 + ka));
    d[0] = fmaf(a_g, b_0, d[0]), d[1] = fmaf(a_g, b_1, d[1]);
    d[2] = fmaf(a_g8, b_0, d[2]), d[3] = fmaf(a_g8, b_1, d[3]);
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// d += a x b with each operand split into high and low TF32 parts (11 significant bits each):
// low x high, high x low, then high x high. F16 and BF16 values are exact in TF32, so their low
// parts are zeros: for such a b (`b_exact`, the cache's K or V) high x low adds exact zeros to d,
// which leaves every bit of d as it was, and is skipped.
template <int kA, int kB>
__device__ __forceinline__ void MmaSplit(float (&d)[4], const float (&a)[kA], const float (&b)[kB],
                                         bool b_exact) {
  static_assert(kA == 4 && kB == 2, "m16n8k8 fragments");
  uint32_t a_hi[4], a_lo[4], b_hi[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a_hi[i] = Tf32(a[i]);
    a_lo[i] = Tf32(__fsub_rn(a[i], __uint_as_float(a_hi[i])));
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) b_hi[i] = Tf32(b[i]);
  Mma(d, a_lo, b_hi);
  if (!b_exact) {
    uint32_t b_lo[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) b_lo[i] = Tf32(__fsub_rn(b[i], __uint_as_float(b_hi[i])));
    Mma(d, a_hi, b_lo);
  }
  Mma(d, a_hi, b_hi);
}

// Whether a cache half of this element type holds values exact in TF32 (MmaSplit's b_exact).
__device__ __forceinline__ bool ExactInTf32(DType type) {
  return type == DType::F16 || type == DType::BF16;
}

__device__ __forceinline__ int64_t KvRowOf(const KvLayerView& kv, int seq, int pos) {
  if (kv.ring > 0) return static_cast<int64_t>(seq) * kv.ring + pos % kv.ring;
  const int32_t b = kv.table[static_cast<int64_t>(seq) * kv.table_stride + pos / kv.block];
  return b < 0 ? -1 : static_cast<int64_t>(b) * kv.block + pos % kv.block;
}

__device__ __forceinline__ float Widen(float x) {
  return x;
}
__device__ __forceinline__ float Widen(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float Widen(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// Loading rows [32 b, 32 b + 32) of one cache half (K or V, element type T, `width` per row),
// head columns [col, col + head_dim), widened into a tile (stride floats a key; dims past
// head_dim are left as they are). `key_rows` holds each key's storage row, -1 for keys outside
// [lo, last] or without storage: their scores are masked, and zero values add nothing. When
// rows, columns and widths are 16-byte aligned each thread fetches a batch of up to 8 16-byte
// words before it stores any, so the loads of a batch (of both halves, where they share a type)
// are in flight together.
template <typename T, int kDims>
struct HalfLoad {
  static constexpr int kPer = 16 / static_cast<int>(sizeof(T));  // values a 16-byte load brings
  static constexpr int kChunks = kDims / kPer;                   // loads a key's padded dims take
  static constexpr int kPerThread = kBlockKeys * kChunks / kThreads;
  static constexpr int kBatch = kPerThread < 8 ? kPerThread : 8;
  static_assert(kPerThread * kThreads == kBlockKeys * kChunks && kPerThread % kBatch == 0);

  const T* base;
  int64_t width;
  uint4 raw[kBatch];

  __device__ HalfLoad(const void* src, int64_t w, int64_t col)
      : base(static_cast<const T*>(src) + col), width(w) {}

  __device__ __forceinline__ void Fetch(const int64_t* key_rows, int head_dim, int j0) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = (j0 + u) * kThreads + static_cast<int>(threadIdx.x);
      const int key = i / kChunks, c = i % kChunks * kPer;
      const int64_t row = c < head_dim ? key_rows[key] : -1;
      raw[u] = row >= 0 ? *reinterpret_cast<const uint4*>(base + row * width + c) : uint4{};
    }
  }
  __device__ __forceinline__ void Store(int head_dim, int j0, float* dst, int stride) const {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = (j0 + u) * kThreads + static_cast<int>(threadIdx.x);
      const int key = i / kChunks, c = i % kChunks * kPer;
      if (c >= head_dim) continue;
      const T* vals = reinterpret_cast<const T*>(&raw[u]);
      float4* out = reinterpret_cast<float4*>(dst + key * stride + c);
#pragma unroll
      for (int e = 0; e < kPer; e += 4)
        out[e / 4] =
            make_float4(Widen(vals[e]), Widen(vals[e + 1]), Widen(vals[e + 2]), Widen(vals[e + 3]));
    }
  }
  // The unaligned path: one value at a time.
  __device__ void LoadScalar(const int64_t* key_rows, int head_dim, float* dst, int stride) const {
    for (int i = threadIdx.x; i < kBlockKeys * head_dim; i += kThreads) {
      const int key = i / head_dim, c = i % head_dim;
      const int64_t row = key_rows[key];
      dst[key * stride + c] = row >= 0 ? Widen(base[row * width + c]) : 0.0f;
    }
  }
};

template <typename T, int kDims>
__device__ __forceinline__ void LoadHalf(const void* src, int64_t width, const int64_t* key_rows,
                                         int64_t col, int head_dim, bool vec, float* dst,
                                         int stride) {
  HalfLoad<T, kDims> h(src, width, col);
  if (!vec) return h.LoadScalar(key_rows, head_dim, dst, stride);
#pragma unroll
  for (int j0 = 0; j0 < h.kPerThread; j0 += h.kBatch) {
    h.Fetch(key_rows, head_dim, j0);
    h.Store(head_dim, j0, dst, stride);
  }
}

// Both halves of one element type, each batch's K and V loads issued together.
template <typename T, int kDimTiles>
__device__ __forceinline__ void LoadPair(const KvLayerView& kv, const int64_t* key_rows,
                                         int64_t col, int head_dim, bool vec, char* smem) {
  using L = TileLayout<kDimTiles>;
  float* ks = reinterpret_cast<float*>(smem + L::kK);
  float* vs = reinterpret_cast<float*>(smem + L::kV);
  HalfLoad<T, L::kDims> k(kv.k, kv.k_width, col), v(kv.v, kv.v_width, col);
  if (!vec) {
    k.LoadScalar(key_rows, head_dim, ks, L::kKStride);
    v.LoadScalar(key_rows, head_dim, vs, L::kVStride);
    return;
  }
#pragma unroll
  for (int j0 = 0; j0 < k.kPerThread; j0 += k.kBatch) {
    k.Fetch(key_rows, head_dim, j0);
    v.Fetch(key_rows, head_dim, j0);
    k.Store(head_dim, j0, ks, L::kKStride);
    v.Store(head_dim, j0, vs, L::kVStride);
  }
}

// One half whose element type differs from the other half's.
template <int kDims>
__device__ __forceinline__ void LoadHalfOf(DType type, const void* src, int64_t width,
                                           const int64_t* key_rows, int64_t col, int head_dim,
                                           bool vec, float* dst, int stride) {
  switch (type) {
    case DType::F16:
      return LoadHalf<__half, kDims>(src, width, key_rows, col, head_dim, vec, dst, stride);
    case DType::BF16:
      return LoadHalf<__nv_bfloat16, kDims>(src, width, key_rows, col, head_dim, vec, dst, stride);
    default:
      return LoadHalf<float, kDims>(src, width, key_rows, col, head_dim, vec, dst, stride);
  }
}

// Keys [32 b, 32 b + 32) of one sequence (storage rows in key_rows) into the K and V tiles.
template <int kDimTiles>
__device__ __forceinline__ void LoadBlock(const KvLayerView& kv, const int64_t* key_rows,
                                          int64_t col, int head_dim, bool vec, char* smem) {
  using L = TileLayout<kDimTiles>;
  if (kv.type_k == kv.type_v) {
    switch (kv.type_k) {
      case DType::F16:
        return LoadPair<__half, kDimTiles>(kv, key_rows, col, head_dim, vec, smem);
      case DType::BF16:
        return LoadPair<__nv_bfloat16, kDimTiles>(kv, key_rows, col, head_dim, vec, smem);
      default:
        return LoadPair<float, kDimTiles>(kv, key_rows, col, head_dim, vec, smem);
    }
  }
  LoadHalfOf<L::kDims>(kv.type_k, kv.k, kv.k_width, key_rows, col, head_dim, vec,
                       reinterpret_cast<float*>(smem + L::kK), L::kKStride);
  LoadHalfOf<L::kDims>(kv.type_v, kv.v, kv.v_width, key_rows, col, head_dim, vec,
                       reinterpret_cast<float*>(smem + L::kV), L::kVStride);
}

// Scores of warp w's 8 keys for the tile's 16 rows: s[2 r + c] is row g + 8 r, key 8 w + 2 t + c.
// The dims are summed in four interleaved chains (k-step j into chain j % 4), added in a fixed
// tree.
//
// kLean keeps the loops over k-steps rolled (the same operations in the same order): a decode
// launch folds one or two blocks, so fully unrolled code runs once per block and its warps
// wait on instruction fetches (62% of their stalls in the split kernel, session 14); the
// whole-tile kernel folds many blocks and keeps the unrolled code.
template <int kDimTiles, bool kLean>
__device__ __forceinline__ void ScoreBlock(const char* smem, float (&s)[4], bool k_exact) {
  using L = TileLayout<kDimTiles>;
  const float* qs = reinterpret_cast<const float*>(smem + L::kQ);
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, g = lane / 4, t = lane % 4;
  const float* krow = reinterpret_cast<const float*>(smem + L::kK) + (8 * w + g) * L::kKStride;
  float chain[4][4] = {};
#pragma unroll(kLean ? 1 : kDimTiles)
  for (int j0 = 0; j0 < 4 * kDimTiles; j0 += 4) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {  // k-step j0 + c into chain c
      const int d = 8 * (j0 + c) + t;
      const float a[4] = {qs[g * L::kQStride + d], qs[(g + 8) * L::kQStride + d],
                          qs[g * L::kQStride + d + 4], qs[(g + 8) * L::kQStride + d + 4]};
      const float b[2] = {krow[d], krow[d + 4]};
      MmaSplit(chain[c], a, b, k_exact);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    s[i] = __fadd_rn(__fadd_rn(chain[0][i], chain[1][i]), __fadd_rn(chain[2][i], chain[3][i]));
}

// The rows a thread holds (g = lane / 4 and g + 8) in one pass over one sequence.
struct RowPair {
  bool active[2];
  int lo[2], last[2];
};

// Online-softmax state of a thread's two rows and its accumulator fragments: o[n][2 r + c] is
// row g + 8 r, dim 8 (kDimTiles w + n) + 2 t + c.
template <int kDimTiles>
struct FoldState {
  float m[2], l[2];
  float o[kDimTiles][4];
  __device__ void Clear() {
#pragma unroll
    for (int r = 0; r < 2; ++r) m[r] = -INFINITY, l[r] = 0.0f;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
  }
};

// o = o * corr + P x V for the rows that took keys from this block (the others keep their
// bits): warp w's dims, eight at a time, over the block's 32 keys in four k-steps.
template <int kDimTiles, bool kLean>
__device__ __forceinline__ void AccumulateBlock(const char* smem, const bool (&upd)[2],
                                                const float (&corr)[2], bool v_exact,
                                                FoldState<kDimTiles>& st) {
  using L = TileLayout<kDimTiles>;
  const float* ps = reinterpret_cast<const float*>(smem + L::kP);
  const float* vs = reinterpret_cast<const float*>(smem + L::kV);
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, g = lane / 4, t = lane % 4;
  constexpr int kChunk = kDimTiles < 8 ? kDimTiles : 8;
#pragma unroll
  for (int n0 = 0; n0 < kDimTiles; n0 += kChunk) {
    float pv[kChunk][4] = {};
#pragma unroll(kLean ? 1 : kBlockKeys / 8)
    for (int j = 0; j < kBlockKeys / 8; ++j) {
      const int k = 8 * j + t;
      const float a[4] = {ps[g * L::kPStride + k], ps[(g + 8) * L::kPStride + k],
                          ps[g * L::kPStride + k + 4], ps[(g + 8) * L::kPStride + k + 4]};
#pragma unroll
      for (int n = 0; n < kChunk; ++n) {
        const int d = 8 * (kDimTiles * w + n0 + n) + g;
        const float b[2] = {vs[k * L::kVStride + d], vs[(k + 4) * L::kVStride + d]};
        MmaSplit(pv[n], a, b, v_exact);
      }
    }
#pragma unroll
    for (int n = 0; n < kChunk; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (upd[i / 2])
          st.o[n0 + n][i] = __fadd_rn(__fmul_rn(st.o[n0 + n][i], corr[i / 2]), pv[n][i]);
  }
}

// One block of the online softmax for the thread's rows: masked scores, the block's row maxima
// and sums across the four warps (sums in warp order), P to shared memory, the state update.
template <int kDimTiles, bool kLean>
__device__ __forceinline__ void FoldBlock(char* smem, int b, const RowPair& rows,
                                          const KvLayerView& kv, FoldState<kDimTiles>& st) {
  using L = TileLayout<kDimTiles>;
  float* ps = reinterpret_cast<float*>(smem + L::kP);
  float* red_max = reinterpret_cast<float*>(smem + L::kRed);
  float* red_sum = red_max + kWarps * kTileRows;
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, g = lane / 4, t = lane % 4;
  float s[4];
  ScoreBlock<kDimTiles, kLean>(smem, s, ExactInTf32(kv.type_k));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int p = kBlockKeys * b + 8 * w + 2 * t + c;
      if (!rows.active[r] || p < rows.lo[r] || p > rows.last[r]) s[2 * r + c] = -INFINITY;
    }
    float mx = fmaxf(s[2 * r], s[2 * r + 1]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (t == 0) red_max[w * kTileRows + g + 8 * r] = mx;
  }
  __syncthreads();
  bool upd[2];
  float m_new[2], corr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float bmax = red_max[row];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) bmax = fmaxf(bmax, red_max[v * kTileRows + row]);
    upd[r] = bmax != -INFINITY;
    m_new[r] = fmaxf(st.m[r], bmax);
    corr[r] = st.m[r] == -INFINITY ? 0.0f : expf(st.m[r] - m_new[r]);
    float p[2];
#pragma unroll
    for (int c = 0; c < 2; ++c)
      p[c] = s[2 * r + c] == -INFINITY ? 0.0f : expf(s[2 * r + c] - m_new[r]);
    *reinterpret_cast<float2*>(ps + row * L::kPStride + 8 * w + 2 * t) = make_float2(p[0], p[1]);
    float sum = __fadd_rn(p[0], p[1]);
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
    if (t == 0) red_sum[w * kTileRows + row] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (!upd[r]) continue;
    const int row = g + 8 * r;
    float bsum = red_sum[row];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) bsum = __fadd_rn(bsum, red_sum[v * kTileRows + row]);
    st.l[r] = __fadd_rn(__fmul_rn(st.l[r], corr[r]), bsum);
    st.m[r] = m_new[r];
  }
  AccumulateBlock<kDimTiles, kLean>(smem, upd, corr, ExactInTf32(kv.type_v), st);
}

// The first block of split `split` among blocks [lo / 32, last / 32]; past last / 32 when the
// split holds none of the keys [lo, last].
__device__ __forceinline__ int FirstBlock(int split, int lo, int last) {
  if (last < lo) return 0x7fffffff;
  const int first = lo / kBlockKeys;
  return first + ((split - first) % kSplits + kSplits) % kSplits;
}
__device__ __forceinline__ bool SplitHasKeys(int split, int lo, int last) {
  return last >= lo && FirstBlock(split, lo, last) <= last / kBlockKeys;
}

// Split `split` of keys [lo, last] of sequence `seq` from the empty state: its blocks (those
// congruent to the split modulo kSplits) in ascending order. Every thread of the block calls it
// with the same arguments.
template <int kDimTiles, bool kLean>
__device__ __forceinline__ void FoldSplit(char* smem, const KvLayerView& kv, int seq, int64_t col,
                                          int head_dim, bool vec, int split, int lo, int last,
                                          const RowPair& rows, FoldState<kDimTiles>& st) {
  __shared__ int64_t key_rows[kBlockKeys];
  st.Clear();
  for (int b = FirstBlock(split, lo, last); b <= last / kBlockKeys; b += kSplits) {
    // A barrier separates this write from the previous block's loads, which read the table;
    // the next one separates the previous fold's reads of the tiles from this block's loads.
    if (threadIdx.x < kBlockKeys) {
      const int p = kBlockKeys * b + static_cast<int>(threadIdx.x);
      key_rows[threadIdx.x] = p >= lo && p <= last ? KvRowOf(kv, seq, p) : -1;
    }
    __syncthreads();
    LoadBlock<kDimTiles>(kv, key_rows, col, head_dim, vec, smem);
    __syncthreads();
    FoldBlock<kDimTiles, kLean>(smem, b, rows, kv, st);
  }
}

}  // namespace lockstep::backend::cuda::attention

// AVX2(+FMA/F16C) dot kernels. Only the exact integer block sums (and the float lanes of the
// float types, added in DotF32's lane order with separate mul and add) are vectorized; the
// per-block float composition and reduction are the shared ones from dot_internal.h.
#include <immintrin.h>

#include <cstring>

#include "quant/dot_extra.h"
#include "quant/dot_f32_block_x86.h"
#include "quant/dot_x86.h"
#include "quant/weighted_rows_x86.h"

namespace lockstep::quant::detail {
namespace {

// Pairwise int32 sums of unsigned(0..127) x signed int8 products.
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// Signed x signed via |w| and sign(x, w).
inline __m256i DotS8S8(__m256i w, __m256i x) {
  return DotU8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// F32/F16 weights against float activations, kCols weight rows at once: each row's lanes add
// in DotF32's order (separate multiply and add), the rows only share the activation loads.
template <int kBytes, int kCols>
void FloatCols(const uint8_t* const* w, const float* a, int64_t n, float* out) {
  __m256 acc[kCols];
  for (int c = 0; c < kCols; ++c) acc[c] = _mm256_setzero_ps();
  // Prefetch the same position kCols rows on, where the caller's next call reads (see
  // PrefetchAhead in dot_avx512.cpp): one line per 64 bytes consumed.
  const int64_t ahead = kCols * n * kBytes;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(a + i);
    if ((i * kBytes) % 64 == 0)
      for (int c = 0; c < kCols; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(w[c] + kBytes * i + ahead), _MM_HINT_T0);
    for (int c = 0; c < kCols; ++c)
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(LoadW<kBytes>(w[c], i), xv));
  }
  for (int c = 0; c < kCols; ++c) {
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[c]);
    for (int64_t j = i, k = 0; j < n; ++j, ++k) {
      float wj;
      if constexpr (kBytes == 4)
        std::memcpy(&wj, w[c] + 4 * j, 4);
      else
        wj = Half(w[c] + 2 * j);
      lanes[k] += wj * a[j];
    }
    const float s0 = (lanes[0] + lanes[4]) + (lanes[1] + lanes[5]);
    const float s1 = (lanes[2] + lanes[6]) + (lanes[3] + lanes[7]);
    out[c] = s0 + s1;
  }
}

template <int kBytes>
void FloatDotCols(const uint8_t* const* w, int n_cols, const PreparedRow& x, float* out) {
  const float* a = x.f32.data();
  switch (n_cols) {
    case 1:
      return FloatCols<kBytes, 1>(w, a, x.n, out);
    case 2:
      return FloatCols<kBytes, 2>(w, a, x.n, out);
    case 3:
      return FloatCols<kBytes, 3>(w, a, x.n, out);
    default:
      return FloatCols<kBytes, 4>(w, a, x.n, out);
  }
}

float Bf16Dot(const uint8_t* w, const PreparedRow& x) {
  const float* a = x.f32.data();
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= x.n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i));
    const __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(wv, _mm256_loadu_ps(a + i)));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  for (int k = 0; i < x.n; ++i, ++k) {
    uint16_t b;
    std::memcpy(&b, w + 2 * i, 2);
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float wi;
    std::memcpy(&wi, &u, 4);
    lanes[k] += wi * a[i];
  }
  const float s0 = (lanes[0] + lanes[4]) + (lanes[1] + lanes[5]);
  const float s1 = (lanes[2] + lanes[6]) + (lanes[3] + lanes[7]);
  return s0 + s1;
}

float DotQ8_0(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * 34;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4));
    acc.Add(b, Combine(Half(wb), ActScale(xb), Hsum(DotS8S8(wv, xv))));
  }
  return acc.Sum();
}

// Nibble-level types: levels looked up by shuffle (tables in dot_x86.h).
template <Nib kKind>
float NibbleDot(const uint8_t* w, const PreparedRow& x) {
  constexpr int kBytes = NibbleBlockBytes<kKind>();
  const __m256i table = NibbleTable<kKind>();
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * kBytes;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const __m256i wv = _mm256_shuffle_epi8(table, LoadNibbles(wb + NibbleQsOffset<kKind>()));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4));
    acc.Add(b, Combine(NibbleScale<kKind>(wb), ActScale(xb), Hsum(DotS8S8(wv, xv))));
  }
  return acc.Sum();
}

// Pairwise int16 products of unsigned x signed bytes times one int16 scale per lane, summed in
// pairs: exact (the byte pairs stay below 2^15, the scaled pairs below 2^31), so a block's
// sub-block sums can be scaled and added in one vector with a single horizontal sum at the end:
// the same integer as scaling each sub-block's sum on its own.
inline __m256i ScaledDot(__m256i u, __m256i s, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

template <bool kFive>
float DotQ45_K(const uint8_t* w, const PreparedRow& x) {
  constexpr int kBytes = kFive ? 176 : 144;
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i min_ctl = K4MinControl();
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * kBytes;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const uint8_t* qs = wb + (kFive ? 48 : 16);
    const __m256i qh = kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 16))
                             : _mm256_setzero_si256();
    uint64_t sc, mn;
    UnpackK4Scales(wb + 4, &sc, &mn);
    __m256i sums = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p));
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1 << (2 * p)));
        const __m256i b1 = _mm256_set1_epi8(static_cast<char>(2 << (2 * p)));
        const __m256i s16 = _mm256_set1_epi8(16);
        lo = _mm256_or_si256(
            lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), s16));
        hi = _mm256_or_si256(
            hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), s16));
      }
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 64 * p));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 36 + 64 * p));
      const auto scale = [&](int j) {
        return _mm256_set1_epi16(static_cast<int16_t>((sc >> (8 * j)) & 0xFF));
      };
      sums = _mm256_add_epi32(sums, ScaledDot(lo, x0, scale(2 * p)));
      sums = _mm256_add_epi32(sums, ScaledDot(hi, x1, scale(2 * p + 1)));
    }
    // Min j covers the 16-level sums 2j and 2j + 1.
    const __m256i mins = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<int64_t>(mn)), min_ctl);
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 260));
    int32_t isum, imin;
    Hsum2(sums, _mm256_madd_epi16(bsums, mins), &isum, &imin);
    acc.Add(b, CombineMin(Half(wb), Half(wb + 2), ActScale(xb), isum, imin));
  }
  return acc.Sum();
}

// Q6_K: levels q in 0..63 against the activations, each 16-group scaled by its int8 scale, and
// the -32 offset applied once per block through the 16-level sums: sum_g sc_g (s_g - 32 bsum_g)
// = sum_g sc_g s_g - 32 sum_g sc_g bsum_g, the same integer.
float DotQ6_K(const uint8_t* w, const PreparedRow& x) {
  const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 210;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const auto* sc = reinterpret_cast<const int8_t*>(wb + 192);
    __m256i sums = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = wb + 64 * half;
      const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 128 + 32 * half));
      for (int k = 0; k < 4; ++k) {
        const __m256i src = (k & 1) ? qb : qa;
        const __m256i lo =
            k < 2 ? _mm256_and_si256(src, m4) : _mm256_and_si256(_mm256_srli_epi16(src, 4), m4);
        const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m3);
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
        const int e0 = 128 * half + 32 * k, g = e0 / 16;
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + e0));
        // Lanes 0..7: group g (the first 16 elements), 8..15: group g + 1.
        const __m256i scale16 = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        sums = _mm256_add_epi32(sums, ScaledDot(q, xv, scale16));
      }
    }
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 260));
    int32_t level_sum, offset_sum;
    Hsum2(sums, _mm256_madd_epi16(bsums, sc16), &level_sum, &offset_sum);
    acc.Add(b, Combine(Half(wb + 208), ActScale(xb), level_sum - 32 * offset_sum));
  }
  return acc.Sum();
}

float DotIq4Xs(const uint8_t* w, const PreparedRow& x) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables::kIq4nlValues));
  const __m256i table = _mm256_set_m128i(t, t);
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 136;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    uint16_t sh;
    std::memcpy(&sh, wb + 2, 2);
    __m256i sums = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((wb[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      const __m256i wv = _mm256_shuffle_epi8(table, LoadNibbles(wb + 8 + 16 * ib));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 32 * ib));
      // |level| x sign-adjusted activation, as DotS8S8, scaled by the sub-block's ls - 32.
      sums = _mm256_add_epi32(sums, ScaledDot(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv),
                                              _mm256_set1_epi16(static_cast<int16_t>(ls - 32))));
    }
    acc.Add(b, Combine(Half(wb), ActScale(xb), Hsum(sums)));
  }
  return acc.Sum();
}

}  // namespace

void DotF32ColsAvx2(const float* const* a, int n_cols, const float* b, int64_t n, float* out) {
  const auto* const* w = reinterpret_cast<const uint8_t* const*>(a);
  switch (n_cols) {
    case 1:
      return FloatCols<4, 1>(w, b, n, out);
    case 2:
      return FloatCols<4, 2>(w, b, n, out);
    case 3:
      return FloatCols<4, 3>(w, b, n, out);
    default:
      return FloatCols<4, 4>(w, b, n, out);
  }
}

void DotF32BlockAvx2(const float* const* keys, const float* const* queries, int n_queries,
                     int64_t n, float* const* out) {
  int q = 0;  // two queries a pass: 8 sums in flight in the 16 ymm registers
  for (; q + 2 <= n_queries; q += 2) F32KeysBlock<2>(keys, queries + q, n, out + q);
  if (q < n_queries) F32KeysBlock<1>(keys, queries + q, n, out + q);
}

namespace {

// Eight float lanes; 16 elements (two registers) an accumulator a chunk: four accumulators fill
// 8 of the 16 ymm registers and one alone still has two independent sums. The last n % 8
// elements in scalar code (the same operations).
struct Lanes8f {
  using V = __m256;
  static constexpr int kLanes = 8, kWideRegs = 2;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Set1(float x) { return _mm256_set1_ps(x); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  template <int kQ>
  static void Tail(const float* const* rows, int n_rows, const float* const* w, int64_t i,
                   int n_left, float* const* acc) {
    for (int q = 0; q < kQ; ++q)
      for (int64_t e = i; e < i + n_left; ++e)
        for (int t = 0; t < n_rows; ++t) acc[q][e] += w[q][t] * rows[t][e];
  }
};

}  // namespace

void AddWeightedRowsAvx2(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                         int64_t n, float* const* acc) {
  AddWeightedRowsWith<Lanes8f>(rows, n_rows, w, n_acc, n, acc);
}

Kernel Avx2Kernel(DType t) {
  switch (t) {
    case DType::F32:
      return {nullptr, FloatDotCols<4>};
    case DType::F16:
      return {nullptr, FloatDotCols<2>};
    case DType::BF16:
      return {Bf16Dot, nullptr};
    case DType::Q8_0:
      return {DotQ8_0, nullptr};
    case DType::Q4_0:
      return {NibbleDot<Nib::kQ4_0>, nullptr};
    case DType::IQ4_NL:
      return {NibbleDot<Nib::kIq4Nl>, nullptr};
    case DType::MXFP4:
      return {NibbleDot<Nib::kMxfp4>, nullptr};
    case DType::Q4_K:
      return {DotQ45_K<false>, nullptr};
    case DType::Q5_K:
      return {DotQ45_K<true>, nullptr};
    case DType::Q6_K:
      return {DotQ6_K, nullptr};
    case DType::IQ4_XS:
      return {DotIq4Xs, nullptr};
    default:
      return {Avx2DotExtra(t), nullptr};  // Q4_1, Q5_0, Q5_1, Q2_K, Q3_K (or none)
  }
}

}  // namespace lockstep::quant::detail

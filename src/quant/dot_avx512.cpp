// AVX-512 (F, BW, VL, DQ, VNNI) dot kernels, several weight rows per call. As everywhere, only
// the exact integer block sums are vectorized differently; the per-block float composition is
// the shared one, done four blocks at a time lane by lane (the same IEEE operations per block)
// and accumulated into Acc8's lanes in block order, so results equal the portable kernels.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quant/dot_x86.h"

namespace lockstep::quant::detail {
namespace {

inline __m512i LoadZ(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

// Acc8 for kCols rows held as two 4-lane halves: blocks b..b+3 (b % 4 == 0) go to half b/4 % 2,
// lane by lane, which is Acc8::Add in block order.
template <int kCols>
struct Acc8x {
  __m128 h[kCols][2];
  Acc8x() {
    for (auto& c : h) c[0] = c[1] = _mm_setzero_ps();
  }
  void Add4(int c, int64_t b, __m128 v) { h[c][(b >> 2) & 1] = _mm_add_ps(h[c][(b >> 2) & 1], v); }
  Acc8 Scalar(int c) const {
    Acc8 a;
    _mm_storeu_ps(a.a, h[c][0]);
    _mm_storeu_ps(a.a + 4, h[c][1]);
    return a;
  }
};

// How far ahead of a block to prefetch: the same block kCols rows on, which is where the next
// call reads when the caller walks a matrix kCols contiguous rows at a time. Measured on Zen 4
// (matvec_bench): far better than a fixed distance within the row, even for 4096-wide rows
// (9 KiB ahead): the stream stays busy across calls. A prefetch never faults, so a guess past
// the matrix (or for rows that are not contiguous) only costs a wasted line.
inline int64_t PrefetchAhead(int k_cols, int64_t row_bytes) {
  return k_cols * row_bytes;
}

// int8 weights x int8 activations: dpbusd on |w| and x with w's sign.
inline __m256i DotS8(__m256i w, __m256i x) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

// Four blocks per step: four int8 dots reduced together, Combine for the four lane by lane,
// added to Acc8's lanes in block order; leftover blocks one at a time.
template <class Block, int kCols>
void Block32Cols(const uint8_t* const* w, const PreparedRow& x, float* out) {
  const Block blk;
  constexpr int kBytes = Block::kBytes;
  const int64_t nb = x.n / 32;
  const int64_t ahead = PrefetchAhead(kCols, nb * kBytes);
  Acc8x<kCols> acc;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    __m256i xv[4];
    for (int k = 0; k < 4; ++k) xv[k] = LoadY(xb + k * kQ8x32Bytes + 4);
    const __m128 dx = ActScales4(xb, kQ8x32Bytes);
    for (int c = 0; c < kCols; ++c) {
      const uint8_t* wb = w[c] + b * kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(wb + ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wb + ahead + 64), _MM_HINT_T0);
      __m256i s[4];
      for (int k = 0; k < 4; ++k) s[k] = DotS8(blk.Levels(wb + k * kBytes), xv[k]);
      acc.Add4(c, b, Combine4(blk.Scales4(wb), dx, Hsum4(s[0], s[1], s[2], s[3])));
    }
  }
  for (int c = 0; c < kCols; ++c) {
    Acc8 a = acc.Scalar(c);
    for (int64_t t = b; t < nb; ++t) {
      const uint8_t* wb = w[c] + t * kBytes;
      const uint8_t* xb = x.q.data() + t * kQ8x32Bytes;
      a.Add(t, Combine(blk.Scale(wb), ActScale(xb), Hsum(DotS8(blk.Levels(wb), LoadY(xb + 4)))));
    }
    out[c] = a.Sum();
  }
}

// int16 lane index vector: lanes 0..15 -> a, 16..31 -> b.
inline __m512i SplitIndex(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)),
                            _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
}

inline __m256i Fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Q4_K: a 64-byte load of qs holds sub-blocks 2p (low nibbles, bytes 0-31), 2p+2 (low, 32-63),
// 2p+1 and 2p+3 (high nibbles); activation halves are regrouped to match with lane shuffles.
template <int kCols>
void Q4KCols(const uint8_t* const* w, const PreparedRow& x, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // vpshufb controls that widen one of the 8 scale bytes (broadcast to every 64-bit lane) into
  // all int16 lanes of each 256-bit half: high byte 0x80 selects zero.
  const __m512i sctl[4] = {SplitIndex(0x8000, 0x8002), SplitIndex(0x8001, 0x8003),
                           SplitIndex(0x8004, 0x8006), SplitIndex(0x8005, 0x8007)};
  const __m256i mctl = K4MinControl();
  Acc8Cols acc;
  const int64_t ahead = PrefetchAhead(kCols, x.n / 256 * 144);
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const __m512i x0 = LoadZ(xb + 4), x1 = LoadZ(xb + 68), x2 = LoadZ(xb + 132),
                  x3 = LoadZ(xb + 196);
    const __m512i xs[4] = {_mm512_shuffle_i64x2(x0, x1, 0x44), _mm512_shuffle_i64x2(x0, x1, 0xEE),
                           _mm512_shuffle_i64x2(x2, x3, 0x44), _mm512_shuffle_i64x2(x2, x3, 0xEE)};
    const __m256i bsum = LoadY(xb + 260);
    __m256i isum[4], imin[4];
    for (int c = 0; c < 4; ++c) isum[c] = imin[c] = _mm256_setzero_si256();
    for (int c = 0; c < kCols; ++c) {
      const uint8_t* wb = w[c] + b * 144;
      for (int k = 0; k < 3; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(wb + ahead + 64 * k), _MM_HINT_T0);
      uint64_t sc, mn;
      UnpackK4Scales(wb + 4, &sc, &mn);
      const __m512i sb = _mm512_set1_epi64(static_cast<long long>(sc));
      __m512i a[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i q = LoadZ(wb + 16 + 64 * h);
        const __m512i lo = _mm512_and_si512(q, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        a[h] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_maddubs_epi16(lo, xs[2 * h]),
                                   _mm512_shuffle_epi8(sb, sctl[2 * h]));
        a[h] = _mm512_dpwssd_epi32(a[h], _mm512_maddubs_epi16(hi, xs[2 * h + 1]),
                                   _mm512_shuffle_epi8(sb, sctl[2 * h + 1]));
      }
      isum[c] = Fold(_mm512_add_epi32(a[0], a[1]));
      imin[c] = _mm256_madd_epi16(
          bsum, _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(mn)), mctl));
    }
    const __m128 dx = _mm_set1_ps(ActScale(xb));
    const __m128 d = ColHalves<kCols>(w, b * 144), dmin = ColHalves<kCols>(w, b * 144 + 2);
    // CombineMin lane by lane: (d * dx) * isum - (dmin * dx) * imin.
    acc.Add(b, _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, dx),
                                     _mm_cvtepi32_ps(Hsum4(isum[0], isum[1], isum[2], isum[3]))),
                          _mm_mul_ps(_mm_mul_ps(dmin, dx),
                                     _mm_cvtepi32_ps(Hsum4(imin[0], imin[1], imin[2], imin[3])))));
  }
  acc.Store(kCols, out);
}

// Q6_K: per 128-element half, 64 bytes of low nibbles give elements 0-63 (low) and 64-127
// (high); the 2-bit high parts come from 32 qh bytes shifted per 32-element quarter.
template <int kCols>
void Q6KCols(const uint8_t* const* w, const PreparedRow& x, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = SplitIndex(4, 2), shr = SplitIndex(0, 2);
  __m512i idx[4];
  for (int k = 0; k < 4; ++k) {
    alignas(64) int16_t v[32];
    for (int i = 0; i < 32; ++i) v[i] = static_cast<int16_t>(4 * k + i / 8);
    idx[k] = _mm512_load_si512(v);
  }
  Acc8Cols acc;
  const int64_t ahead = PrefetchAhead(kCols, x.n / 256 * 210);
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    __m512i xv[4];
    for (int k = 0; k < 4; ++k) xv[k] = LoadZ(xb + 4 + 64 * k);
    const __m256i bsum = LoadY(xb + 260);
    __m256i isum[4], corr[4];
    for (int c = 0; c < 4; ++c) isum[c] = corr[c] = _mm256_setzero_si256();
    for (int c = 0; c < kCols; ++c) {
      const uint8_t* wb = w[c] + b * 210;
      for (int k = 0; k < 4; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(wb + ahead + 64 * k), _MM_HINT_T0);
      const __m256i sc =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 192)));
      const __m512i s16 = _mm512_broadcast_i64x4(sc);
      __m512i a[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i l = LoadZ(wb + 64 * h);
        const __m512i hz = _mm512_broadcast_i64x4(LoadY(wb + 128 + 32 * h));
        const __m512i qa = _mm512_or_si512(_mm512_and_si512(l, m4),
                                           _mm512_and_si512(_mm512_sllv_epi16(hz, shl), m30));
        const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(hz, shr), m30));
        a[h] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_maddubs_epi16(qa, xv[2 * h]),
                                   _mm512_permutexvar_epi16(idx[2 * h], s16));
        a[h] = _mm512_dpwssd_epi32(a[h], _mm512_maddubs_epi16(qb, xv[2 * h + 1]),
                                   _mm512_permutexvar_epi16(idx[2 * h + 1], s16));
      }
      isum[c] = Fold(_mm512_add_epi32(a[0], a[1]));
      corr[c] = _mm256_madd_epi16(bsum, sc);
    }
    // Levels are q - 32: subtract 32 * sum(scale * bsum), exactly, then Combine lane by lane.
    const __m128i total =
        _mm_sub_epi32(Hsum4(isum[0], isum[1], isum[2], isum[3]),
                      _mm_slli_epi32(Hsum4(corr[0], corr[1], corr[2], corr[3]), 5));
    const __m128 dx = _mm_set1_ps(ActScale(xb));
    acc.Add(b,
            _mm_mul_ps(_mm_mul_ps(ColHalves<kCols>(w, b * 210 + 208), dx), _mm_cvtepi32_ps(total)));
  }
  acc.Store(kCols, out);
}

// Instantiates a kCols-templated kernel as a ColsDotFn.
template <template <int> class K>
void Dispatch(const uint8_t* const* w, int n_cols, const PreparedRow& x, float* out) {
  switch (n_cols) {
    case 1:
      return K<1>::Run(w, x, out);
    case 2:
      return K<2>::Run(w, x, out);
    case 3:
      return K<3>::Run(w, x, out);
    default:
      return K<4>::Run(w, x, out);
  }
}
template <class Block>
struct Block32K {
  template <int C>
  struct K {
    static void Run(const uint8_t* const* w, const PreparedRow& x, float* o) {
      Block32Cols<Block, C>(w, x, o);
    }
  };
};
template <int C>
struct Q4KK {
  static void Run(const uint8_t* const* w, const PreparedRow& x, float* o) { Q4KCols<C>(w, x, o); }
};
template <int C>
struct Q6KK {
  static void Run(const uint8_t* const* w, const PreparedRow& x, float* o) { Q6KCols<C>(w, x, o); }
};

}  // namespace

Kernel Avx512Kernel(DType t) {
  switch (t) {
    case DType::Q8_0:
      return {nullptr, Dispatch<Block32K<Q8_0Block>::K>};
    case DType::Q4_0:
      return {nullptr, Dispatch<Block32K<NibbleBlock<Nib::kQ4_0>>::K>};
    case DType::IQ4_NL:
      return {nullptr, Dispatch<Block32K<NibbleBlock<Nib::kIq4Nl>>::K>};
    case DType::MXFP4:
      return {nullptr, Dispatch<Block32K<NibbleBlock<Nib::kMxfp4>>::K>};
    case DType::Q4_K:
      return {nullptr, Dispatch<Q4KK>};
    case DType::Q6_K:
      return {nullptr, Dispatch<Q6KK>};
    default:
      return {};  // float types, Q5_K, IQ4_XS, Q2_K, Q3_K: the AVX2 kernels
  }
}

}  // namespace lockstep::quant::detail

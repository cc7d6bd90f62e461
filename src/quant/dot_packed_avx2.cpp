// AVX2 kernels over packed weights (quant/packed.h): Q4_K, Q6_K and Q8_0 on the same 16-row
// groups as the AVX-512 kernels (dot_packed_avx512.cpp). A packed dword of a block is 64 bytes,
// columns 0-7 in its first 32 and 8-15 in its second, so each half of a group runs as 8 int32
// lanes, one output column per lane. Without VNNI a lane's 4-byte dot is vpmaddubsw (unsigned
// weight levels x signed activation bytes broadcast to every lane, two products per int16) and
// vpmaddwd; the int16 sums are kept far from saturation (see each type), so the integers are
// exact and each lane forms the one-row kernel's integers, its per-block float expression
// (CombineMin / Combine, the same IEEE operations in the same order) and Acc8's partial b % 8:
// every output equals DotRow bit for bit for any row count.
#include <immintrin.h>

#include "quant/dot_x86.h"
#include "quant/packed.h"

namespace lockstep::quant::detail {
namespace {

// Packed dword m of a block's half (columns 8 h .. 8 h + 7 when blk points at byte 32 h):
// lane c holds column 8 h + c's dword.
inline __m256i Ld(const uint8_t* blk, int m) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 * m));
}
inline __m256i Bcast(const uint8_t* p) {
  return _mm256_set1_epi32(static_cast<int>(U32(p)));
}
inline __m256i Byte(__m256i v, int k) {
  return _mm256_and_si256(_mm256_srli_epi32(v, 8 * k), _mm256_set1_epi32(0xFF));
}
// An int16 value (in the low half of each int32 lane) in both int16 halves, for vpmaddwd.
inline __m256i Pair16(__m256i v) {
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}
// Pins a running sum to a register at this point: without it GCC reassociates a whole block's
// integer additions into one wide tree at its end (legal: integer sums are exact in any order),
// which keeps every product alive and spills them to the stack.
inline void Keep(__m256i& v) {
  asm("" : "+x"(v));
}
// The f16 in the low half of each int32 lane, as floats (exact conversion).
inline __m256 HalfLow(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(h));
}
inline __m256 HalfHigh(__m256i v) {
  return HalfLow(_mm256_srli_epi32(v, 16));
}

// Q4_K: packed dwords are the block's 36 (d/dmin, 3 of scales, 32 of nibbles). Levels 0-15
// against activations of at most 127 in magnitude: a vpmaddubsw pair is at most 2 x 15 x 127,
// and the 8 dwords of a sub-block add up in int16 to at most 16 x 15 x 127 = 30480 before
// vpmaddwd multiplies them by the sub-block's scale into int32: exact.
struct Q4K {
  static constexpr int kBlockBytes = 36 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kTileRows = 4;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    // UnpackK4Scales lane by lane: sub-block scales and minimums, each as an int16 pair.
    __m256i sc2[8], mn2[8];
    {
      const __m256i a0 = Ld(blk, 1), a1 = Ld(blk, 2), a2 = Ld(blk, 3);
      const __m256i k6 = _mm256_set1_epi32(0x3F3F3F3F), k4 = _mm256_set1_epi32(0x0F0F0F0F),
                    k2 = _mm256_set1_epi32(0x03030303);
      const __m256i sc_lo = _mm256_and_si256(a0, k6), mn_lo = _mm256_and_si256(a1, k6);
      const __m256i sc_hi =
          _mm256_or_si256(_mm256_and_si256(a2, k4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a0, 6), k2), 4));
      const __m256i mn_hi =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), k4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a1, 6), k2), 4));
      for (int j = 0; j < 8; ++j) {
        sc2[j] = Pair16(Byte(j < 4 ? sc_lo : sc_hi, j % 4));
        mn2[j] = Pair16(Byte(j < 4 ? mn_lo : mn_hi, j % 4));
      }
    }
    const __m256i m4 = _mm256_set1_epi32(0x0F0F0F0F);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {  // qs dwords 8p..8p+7: sub-block 2p (low), 2p + 1 (high)
      __m256i el[R], eh[R];        // int16 sums of the two sub-blocks
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) el[r] = eh[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i q = Ld(blk, 4 + 8 * p + i);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(q, 4), m4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* x = xb[r] + 4 + 64 * p + 4 * i;
          const __m256i pl = _mm256_maddubs_epi16(lo, Bcast(x));
          const __m256i ph = _mm256_maddubs_epi16(hi, Bcast(x + 32));
          el[r] = _mm256_add_epi16(el[r], pl);
          eh[r] = _mm256_add_epi16(eh[r], ph);
          Keep(el[r]);
          Keep(eh[r]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        isum[r] =
            _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_madd_epi16(el[r], sc2[2 * p]),
                                                       _mm256_madd_epi16(eh[r], sc2[2 * p + 1])));
    }
    const __m256i dd = Ld(blk, 0);
    const __m256 d = HalfLow(dd), dmin = HalfHigh(dd);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // Minimum j meets the 16-element activation sums 2j and 2j + 1.
      __m256i imin = _mm256_madd_epi16(mn2[0], Bcast(xb[r] + 260));
      for (int j = 1; j < 8; ++j)
        imin = _mm256_add_epi32(imin, _mm256_madd_epi16(mn2[j], Bcast(xb[r] + 260 + 4 * j)));
      const __m256 dx = _mm256_set1_ps(ActScale(xb[r]));
      out[r] = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(isum[r])),
                             _mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(imin)));
    }
  }
};

// Q6_K: packed dwords 0-31 ql, 32-47 qh, 48-51 the 16 int8 scales, 52 d (high half). Levels
// are stored plus 32 (0-63): a vpmaddubsw pair is at most 2 x 63 x 127 = 16002, two dwords add
// up in int16 to at most 32004 before vpmaddwd multiplies them by their 16-element group's
// scale into int32: exact. The -32 comes out as 32 x sum(scale x bsum), as in the one-row kernel.
struct Q6K {
  static constexpr int kBlockBytes = 53 * 64;
  static constexpr int kActBytes = kQ8x256Bytes;
  static constexpr int kTileRows = 6;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    __m256i sc2[16];  // scale g as an int16 pair
    __m256i scp[8];   // scales 2i (low int16) and 2i + 1 (high), against bsum dword i
    for (int g4 = 0; g4 < 4; ++g4) {
      const __m256i v = Ld(blk, 48 + g4);
      __m256i s[4];
      for (int t = 0; t < 4; ++t) {
        s[t] = _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * t), 24);
        sc2[4 * g4 + t] = Pair16(s[t]);
      }
      scp[2 * g4] = _mm256_or_si256(_mm256_and_si256(s[0], _mm256_set1_epi32(0xFFFF)),
                                    _mm256_slli_epi32(s[1], 16));
      scp[2 * g4 + 1] = _mm256_or_si256(_mm256_and_si256(s[2], _mm256_set1_epi32(0xFFFF)),
                                        _mm256_slli_epi32(s[3], 16));
    }
    const __m256i m4 = _mm256_set1_epi32(0x0F0F0F0F), m3 = _mm256_set1_epi32(0x03030303);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {  // elements 128 h + 32 k .. + 31: scale groups 8h + 2k, + 1
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
          __m256i q[2];
          for (int j = 0; j < 2; ++j) {
            const __m256i src = Ld(blk, 16 * h + 8 * (k & 1) + i + j);
            const __m256i lo =
                k < 2 ? _mm256_and_si256(src, m4) : _mm256_and_si256(_mm256_srli_epi32(src, 4), m4);
            const __m256i hb =
                _mm256_and_si256(_mm256_srli_epi32(Ld(blk, 32 + 8 * h + i + j), 2 * k), m3);
            q[j] = _mm256_or_si256(lo, _mm256_slli_epi32(hb, 4));
          }
          const __m256i sc = sc2[8 * h + 2 * k + i / 4];
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const uint8_t* x = xb[r] + 4 + 128 * h + 32 * k + 4 * i;
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], Bcast(x)),
                                               _mm256_maddubs_epi16(q[1], Bcast(x + 4)));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s, sc));
            Keep(isum[r]);
          }
        }
      }
    const __m256 d = HalfHigh(Ld(blk, 52));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256i corr = _mm256_madd_epi16(scp[0], Bcast(xb[r] + 260));
      for (int i = 1; i < 8; ++i)
        corr = _mm256_add_epi32(corr, _mm256_madd_epi16(scp[i], Bcast(xb[r] + 260 + 4 * i)));
      const __m256i total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(corr, 5));
      out[r] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r]))),
                             _mm256_cvtepi32_ps(total));
    }
  }
};

// Q8_0: packed dword 0 holds d (low half), 1-8 the 32 int8 levels. Signed x signed as
// dot_avx2.cpp's DotS8S8: |level| (0-128, unsigned) against the activation with the level's
// sign; activations are at most 127 in magnitude, so a pair is at most 2 x 128 x 127 = 32512
// (no saturation) and each dword goes to int32 on its own through vpmaddwd with ones.
struct Q80 {
  static constexpr int kBlockBytes = 9 * 64;
  static constexpr int kActBytes = kQ8x32Bytes;
  static constexpr int kTileRows = 8;

  template <int R>
  static void Block(const uint8_t* blk, const uint8_t* const* xb, __m256* out) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i lv = Ld(blk, 1 + i), mag = _mm256_abs_epi8(lv);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i x = _mm256_sign_epi8(Bcast(xb[r] + 4 + 4 * i), lv);
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), ones));
        Keep(s[r]);
      }
    }
    const __m256 d = HalfLow(Ld(blk, 0));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      out[r] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(ActScale(xb[r]))),
                             _mm256_cvtepi32_ps(s[r]));
  }
};

// The rows' activation blocks for one half: the empty asm hides that both halves read the same
// activations, so the compiler reloads each broadcast where it is used instead of hoisting
// every broadcast of the block out of the two halves into stack spills.
template <int R>
inline void Launder(const uint8_t* const* xb, const uint8_t** out) {
  for (int r = 0; r < R; ++r) {
    out[r] = xb[r];
    asm volatile("" : "+r"(out[r]));
  }
}

// A group is one sequential stream, which the hardware prefetcher alone brings in more slowly
// than the kernels consume it (matvec_bench, one row, one thread: Q4_K 14 -> 31 GB/s): each
// block asks for the lines of the block about kPrefetchBytes ahead.
inline constexpr int kPrefetchBytes = 4096;

// R rows (x[0..R-1]) against one group: block by block, each half's contributions added to
// Acc8's partial b % 8 (8 columns per vector), then Acc8's tree, lane by lane. A group of at
// most 8 columns skips its second half.
template <class K, int R>
void RowTile(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, float* out,
             int64_t out_stride) {
  const int halves = n_cols > 8 ? 2 : 1;
  __m256 acc[R][2][8];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (auto& half : acc[r])
      for (auto& v : half) v = _mm256_setzero_ps();
  const uint8_t* xb[R];
  __m256 contrib[R];
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xb[r] = x[r].q.data() + b * K::kActBytes;
    const uint8_t* blk = grp + b * K::kBlockBytes;
    constexpr int64_t kAhead = (kPrefetchBytes + K::kBlockBytes - 1) / K::kBlockBytes;
    for (int l = 0; l < K::kBlockBytes; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(blk + kAhead * K::kBlockBytes + l), _MM_HINT_T0);
    for (int h = 0; h < halves; ++h) {
      const uint8_t* xh[R];
      Launder<R>(xb, xh);
      K::template Block<R>(blk + 32 * h, xh, contrib);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][h][b & 7] = _mm256_add_ps(acc[r][h][b & 7], contrib[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    alignas(32) float sums[16];
    for (int h = 0; h < halves; ++h) {
      const __m256* a = acc[r][h];
      const __m256 s0 = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[1], a[5]));
      const __m256 s1 = _mm256_add_ps(_mm256_add_ps(a[2], a[6]), _mm256_add_ps(a[3], a[7]));
      _mm256_store_ps(sums + 8 * h, _mm256_add_ps(s0, s1));
    }
    for (int c = 0; c < n_cols; ++c) out[r * out_stride + c] = sums[c];
  }
}

template <class K>
void Packed(const uint8_t* grp, int64_t nb, int n_cols, const PreparedRow* x, int64_t n_rows,
            float* out, int64_t out_stride) {
  constexpr int kT = K::kTileRows;
  int64_t r0 = 0;
  for (; r0 + kT <= n_rows; r0 += kT)
    RowTile<K, kT>(grp, nb, n_cols, x + r0, out + r0 * out_stride, out_stride);
  const PreparedRow* xr = x + r0;
  float* o = out + r0 * out_stride;
  WithRowCount<kT>(n_rows - r0, [&]<int R>() {  // the leftover rows, fewer than kT
    RowTile<K, R>(grp, nb, n_cols, xr, o, out_stride);
  });
}

}  // namespace

void Avx2PackGroup(const uint8_t* rows, const int32_t* row_offset, const PackLayout& layout,
                   int64_t nb, uint8_t* dst) {
  const __m256i i0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_offset));
  const __m256i i1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_offset + 8));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = rows + b * layout.block_bytes;
    for (int m = 0; m < layout.n_dwords; ++m, dst += 64) {
      const auto* base = reinterpret_cast<const int*>(blk + layout.offset[m]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst), _mm256_i32gather_epi32(base, i0, 1));
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), _mm256_i32gather_epi32(base, i1, 1));
    }
  }
}

PackedFn Avx2Packed(DType t) {
  switch (t) {
    case DType::Q4_K:
      return Packed<Q4K>;
    case DType::Q6_K:
      return Packed<Q6K>;
    case DType::Q8_0:
      return Packed<Q80>;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

// AVX-512 Q4_K, Q6_K and Q8_0 tile kernels with one output column per int32 lane (16 columns per vector), for
// DotTile. Per weight block the 16 weight rows' dwords are gathered so that lane c of vector m
// holds dword m of row c's block: then vpdpbusd against 4 activation bytes broadcast to every
// lane adds each column's exact partial sums in its own lane, with no horizontal reductions,
// and the per-block float expression runs for 16 columns at once. The integers (sub-block sums
// times scales, minimums times activation sums) are Q4_K's exact ones and every lane does
// CombineMin and Acc8 as the one-row kernel does, so outputs equal DotRow bit for bit.
// GCC 12's AVX-512 headers build some vectors from _mm512_undefined_*(), which trips its own
// -Wuninitialized under -Werror (a known false positive); nothing here reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "quant/dot_x86.h"

namespace lockstep::quant::detail {
namespace {

constexpr int kCols = 16;      // columns per vector: one per int32 lane
constexpr int kWideRows = 16;  // activation rows per unpacked block

inline __m512i Byte(__m512i v, int k) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}
inline __m512i Bcast(const uint8_t* p) {
  return _mm512_set1_epi32(static_cast<int>(U32(p)));
}
// Dword at byte `off` of each of the 16 rows' blocks (rows: byte offsets of the rows).
inline __m512i Gather(const uint8_t* blk0, __m512i rows, int off) {
  return _mm512_i32gather_epi32(rows, blk0 + off, 1);
}

// Q4_K. Block b of the 16 rows, lane c = row c: 8 sub-block scales and minimums (the minimum
// as an int16 pair, to meet two adjacent activation sums in vpdpwssd), nibble levels of qs
// dword i (low: sub-block 2 (i / 8), high: the next one), d and dmin.
struct Q4KWide {
  static constexpr int kBlockBytes = 144, kElems = 256, kActBytes = kQ8x256Bytes;
  __m512i lo[32], hi[32], sc[8], mn2[8];
  __m512 d, dmin;
  void Unpack(const uint8_t* blk0, __m512i rows);
  __m512 Contribution(const uint8_t* xb) const;
};

void Q4KWide::Unpack(const uint8_t* blk0, __m512i rows) {
  Q4KWide* u = this;
  auto dword = [&](int m) { return Gather(blk0, rows, 4 * m); };
  const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F);
  for (int i = 0; i < 32; ++i) {
    const __m512i q = dword(4 + i);
    u->lo[i] = _mm512_and_si512(q, m4);
    u->hi[i] = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
  }
  // UnpackK4Scales, lane by lane.
  const __m512i a0 = dword(1), a1 = dword(2), a2 = dword(3);
  const __m512i k6 = _mm512_set1_epi32(0x3F3F3F3F), k4 = _mm512_set1_epi32(0x0F0F0F0F),
                k2 = _mm512_set1_epi32(0x03030303);
  const __m512i sc_lo = _mm512_and_si512(a0, k6), mn_lo = _mm512_and_si512(a1, k6);
  const __m512i sc_hi = _mm512_or_si512(
      _mm512_and_si512(a2, k4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a0, 6), k2), 4));
  const __m512i mn_hi =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), k4),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a1, 6), k2), 4));
  for (int j = 0; j < 8; ++j) {
    u->sc[j] = Byte(j < 4 ? sc_lo : sc_hi, j % 4);
    const __m512i m = Byte(j < 4 ? mn_lo : mn_hi, j % 4);
    u->mn2[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
  }
  const __m512i dd = dword(0);
  u->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  u->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

// Block b's CombineMin for the 16 columns against one activation block.
inline __m512 Q4KWide::Contribution(const uint8_t* xb) const {
  const Q4KWide& u = *this;
  const uint8_t* xq = xb + 4;
  __m512i isum = _mm512_setzero_si512(), imin = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    const __m512i* q = (j % 2 == 0 ? u.lo : u.hi) + 8 * (j / 2);
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], Bcast(xq + 32 * j));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], Bcast(xq + 32 * j + 4));
    for (int i = 2; i < 8; i += 2) {
      s0 = _mm512_dpbusd_epi32(s0, q[i], Bcast(xq + 32 * j + 4 * i));
      s1 = _mm512_dpbusd_epi32(s1, q[i + 1], Bcast(xq + 32 * j + 4 * i + 4));
    }
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), u.sc[j]));
    imin = _mm512_dpwssd_epi32(imin, u.mn2[j], Bcast(xb + 260 + 4 * j));
  }
  const __m512 dx = _mm512_set1_ps(ActScale(xb));
  return _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, dx), _mm512_cvtepi32_ps(isum)),
                       _mm512_mul_ps(_mm512_mul_ps(u.dmin, dx), _mm512_cvtepi32_ps(imin)));
}

// Q6_K. Lane c = row c: the levels plus 32 (0..63) of 4-element group i (elements 4i..4i+3),
// the 16 group scales, the scales as int16 pairs (2i, 2i+1) for the exact -32 correction
// through the activation sums, and d.
struct Q6KWide {
  static constexpr int kBlockBytes = 210, kElems = 256, kActBytes = kQ8x256Bytes;
  __m512i q[64], sc[16], sc2[8];
  __m512 d;
  void Unpack(const uint8_t* blk0, __m512i rows) {
    const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m3 = _mm512_set1_epi32(0x03030303);
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < 8; ++i) {  // elements l = 4i..4i+3 of each 32-element quarter k
        const __m512i qa = Gather(blk0, rows, 64 * half + 4 * i);
        const __m512i qb = Gather(blk0, rows, 64 * half + 32 + 4 * i);
        const __m512i qh = Gather(blk0, rows, 128 + 32 * half + 4 * i);
        for (int k = 0; k < 4; ++k) {
          const __m512i src = (k & 1) ? qb : qa;
          const __m512i lo = k < 2 ? _mm512_and_si512(src, m4)
                                   : _mm512_and_si512(_mm512_srli_epi32(src, 4), m4);
          const __m512i hb = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * k), m3);
          q[32 * half + 8 * k + i] = _mm512_or_si512(lo, _mm512_slli_epi32(hb, 4));
        }
      }
    for (int g4 = 0; g4 < 4; ++g4) {
      const __m512i v = Gather(blk0, rows, 192 + 4 * g4);
      for (int t = 0; t < 4; ++t)
        sc[4 * g4 + t] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * t), 24);
    }
    for (int i = 0; i < 8; ++i)
      sc2[i] = _mm512_or_si512(_mm512_and_si512(sc[2 * i], _mm512_set1_epi32(0xFFFF)),
                               _mm512_slli_epi32(sc[2 * i + 1], 16));
    // d is bytes 208-209: the dword at 206 keeps the gather inside the block.
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(Gather(blk0, rows, 206), 16)));
  }
  __m512 Contribution(const uint8_t* xb) const {
    const uint8_t* xq = xb + 4;
    __m512i isum = _mm512_setzero_si512(), corr = _mm512_setzero_si512();
    for (int g = 0; g < 16; ++g) {
      __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[4 * g], Bcast(xq + 16 * g));
      for (int i = 1; i < 4; ++i) s = _mm512_dpbusd_epi32(s, q[4 * g + i], Bcast(xq + 16 * g + 4 * i));
      isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, sc[g]));
    }
    for (int i = 0; i < 8; ++i) corr = _mm512_dpwssd_epi32(corr, sc2[i], Bcast(xb + 260 + 4 * i));
    // Levels are q - 32: isum - 32 * sum(scale * bsum), exactly, then Combine lane by lane.
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 5));
    return _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ActScale(xb))), _mm512_cvtepi32_ps(total));
  }
};

// Q8_0. Lane c = row c: 4 int8 levels per dword, the start -128 * (sum of levels) so that
// vpdpbusd on x + 128 (unsigned) gives levels . x exactly, and d.
struct Q8_0Wide {
  static constexpr int kBlockBytes = 34, kElems = 32, kActBytes = kQ8x32Bytes;
  __m512i lv[8], start;
  __m512 d;
  void Unpack(const uint8_t* blk0, __m512i rows) {
    __m512i sum = _mm512_setzero_si512();
    for (int i = 0; i < 8; ++i) {
      lv[i] = Gather(blk0, rows, 2 + 4 * i);
      sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), lv[i]);
    }
    start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(Gather(blk0, rows, 0)));
  }
  __m512 Contribution(const uint8_t* xb) const {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i s = start;
    for (int i = 0; i < 8; ++i)
      s = _mm512_dpbusd_epi32(s, _mm512_xor_si512(Bcast(xb + 4 + 4 * i), bias), lv[i]);
    return _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ActScale(xb))), _mm512_cvtepi32_ps(s));
  }
};

// Acc8 with the 16 columns in lanes.
struct Acc8x16 {
  __m512 a[8];
  void Store(int n_cols, float* out) const {
    const __m512 s0 = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[1], a[5]));
    const __m512 s1 = _mm512_add_ps(_mm512_add_ps(a[2], a[6]), _mm512_add_ps(a[3], a[7]));
    _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n_cols) - 1), _mm512_add_ps(s0, s1));
  }
};

// DotTile for n_cols 1..16 (absent columns repeat the last row, computed but not stored).
template <class K>
void WideTile(const uint8_t* w, size_t row_bytes, int n_cols, const PreparedRow* x,
              int64_t n_rows, float* out, int64_t out_stride) {
  alignas(64) int32_t offs[kCols];
  for (int c = 0; c < kCols; ++c) offs[c] = static_cast<int32_t>(std::min(c, n_cols - 1) * row_bytes);
  const __m512i rows = _mm512_load_si512(offs);
  const int64_t nb = x[0].n / K::kElems;
  K u;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kWideRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kWideRows, n_rows - r0));
    Acc8x16 acc[kWideRows];
    for (int r = 0; r < nr; ++r)
      for (auto& v : acc[r].a) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      u.Unpack(w + b * K::kBlockBytes, rows);
      for (int r = 0; r < nr; ++r) {
        __m512& a = acc[r].a[b & 7];
        a = _mm512_add_ps(a, u.Contribution(x[r0 + r].q.data() + b * K::kActBytes));
      }
    }
    for (int r = 0; r < nr; ++r) acc[r].Store(n_cols, out + (r0 + r) * out_stride);
  }
}

}  // namespace

TileFn Avx512WideTile(DType t) {
  switch (t) {
    case DType::Q4_K:
      return WideTile<Q4KWide>;
    case DType::Q6_K:
      return WideTile<Q6KWide>;
    case DType::Q8_0:
      return WideTile<Q8_0Wide>;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

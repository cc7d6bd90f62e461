// Device side of the integer matmul path: quantized activation rows and, per weight format, a
// lane's share of one block's exact integer sums and the block's float contribution, written as
// quant/dot_portable.cpp writes them (same integers, same float expression).
//
// A block is handled by a group of 4 lanes: lane t (0..3) loads its quarter of the weight block
// (Load), multiplies it with its quarter of each activation row (Dot, dp4a on int8 levels), the
// group adds its 4 integer partials (exact), and Contribution turns the block's integers into
// the float that the CPU adds to partial sum b % 8.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/matmul_int.h"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

namespace intq {

__device__ __forceinline__ float Half(uint32_t bits16) {
  return __half2float(__ushort_as_half(static_cast<uint16_t>(bits16 & 0xFFFF)));
}
// A 32-bit word at a 2-byte aligned address (blocks of 34, 18 and 210 bytes).
__device__ __forceinline__ int Word2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(h[0] | (static_cast<uint32_t>(h[1]) << 16));
}
__device__ __forceinline__ uint32_t ByteOf(uint32_t w, int i) {
  return (w >> (8 * i)) & 0xFF;
}
// (dw * dx) * isum and its two-scale form: quant::detail::Combine / CombineMin.
__device__ __forceinline__ float Combine(float dw, float dx, int isum) {
  return __fmul_rn(__fmul_rn(dw, dx), __int2float_rn(isum));
}
__device__ __forceinline__ float CombineMin(float d, float dmin, float dx, int isum, int imin) {
  return __fsub_rn(__fmul_rn(__fmul_rn(d, dx), __int2float_rn(isum)),
                   __fmul_rn(__fmul_rn(dmin, dx), __int2float_rn(imin)));
}
// The 16 activation levels of a lane's 64-element quarter of a 256-block, as 16 words.
__device__ __forceinline__ void LoadQuarter(const int8_t* q, int* xw) {
  const int4* p = reinterpret_cast<const int4*>(q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int4 v = p[i];
    xw[4 * i] = v.x, xw[4 * i + 1] = v.y, xw[4 * i + 2] = v.z, xw[4 * i + 3] = v.w;
  }
}

// Q4_K / Q5_K: lane t holds sub-blocks 2t (low nibbles of qs[32t ..]) and 2t + 1 (high).
template <bool kFive>
struct K45 {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144, kUnroll = 2;
  static constexpr bool kMin = true;
  struct Part {
    int lo[8], hi[8];
    int sc0, sc1, m0, m1;
    float d, dmin;
  };
  // quant::detail::ScaleMinK4 over the 12 scale bytes held in words s4, s8 (bytes 4..11 and
  // 8..15 of the block, i.e. scale bytes 0..3 in s[0], 4..7 in s[1], 8..11 in s[2]).
  __device__ static void ScaleMin(const uint32_t* s, int j, int* sc, int* m) {
    const auto b = [&](int i) { return static_cast<int>(ByteOf(s[i >> 2], i & 3)); };
    if (j < 4) {
      *sc = b(j) & 63;
      *m = b(j + 4) & 63;
    } else {
      *sc = (b(j + 4) & 0xF) | ((b(j - 4) >> 6) << 4);
      *m = (b(j + 4) >> 4) | ((b(j) >> 6) << 4);
    }
  }
  __device__ static void Load(const uint8_t* blk, int t, Part& p) {
    const uint4 head = *reinterpret_cast<const uint4*>(blk);
    p.d = Half(head.x);
    p.dmin = Half(head.x >> 16);
    const uint32_t s[3] = {head.y, head.z, head.w};
    ScaleMin(s, 2 * t, &p.sc0, &p.m0);
    ScaleMin(s, 2 * t + 1, &p.sc1, &p.m1);
    const uint4* qs = reinterpret_cast<const uint4*>(blk + (kFive ? 48 : 16) + 32 * t);
    uint32_t q[8];
    const uint4 q0 = qs[0], q1 = qs[1];
    q[0] = q0.x, q[1] = q0.y, q[2] = q0.z, q[3] = q0.w;
    q[4] = q1.x, q[5] = q1.y, q[6] = q1.z, q[7] = q1.w;
    uint32_t h[8] = {};
    if (kFive) {
      const uint4* qh = reinterpret_cast<const uint4*>(blk + 16);
      const uint4 h0 = qh[0], h1 = qh[1];
      h[0] = h0.x, h[1] = h0.y, h[2] = h0.z, h[3] = h0.w;
      h[4] = h1.x, h[5] = h1.y, h[6] = h1.z, h[7] = h1.w;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t lo = q[i] & 0x0F0F0F0Fu, hi = (q[i] >> 4) & 0x0F0F0F0Fu;
      if (kFive) {
        lo |= ((h[i] >> (2 * t)) & 0x01010101u) << 4;
        hi |= ((h[i] >> (2 * t + 1)) & 0x01010101u) << 4;
      }
      p.lo[i] = static_cast<int>(lo);
      p.hi[i] = static_cast<int>(hi);
    }
  }
  __device__ static void Dot(const Part& p, const int8_t* q, const int16_t* bsum, int t, int* isum,
                             int* imin) {
    int xw[16];
    LoadQuarter(q + 64 * t, xw);
    int s_lo = 0, s_hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      s_lo = __dp4a(p.lo[i], xw[i], s_lo);
      s_hi = __dp4a(p.hi[i], xw[8 + i], s_hi);
    }
    const int2 bs = *reinterpret_cast<const int2*>(bsum + 4 * t);
    const int b0 = static_cast<int16_t>(bs.x & 0xFFFF), b1 = static_cast<int16_t>(bs.x >> 16);
    const int b2 = static_cast<int16_t>(bs.y & 0xFFFF), b3 = static_cast<int16_t>(bs.y >> 16);
    *isum = p.sc0 * s_lo + p.sc1 * s_hi;
    *imin = p.m0 * (b0 + b1) + p.m1 * (b2 + b3);
  }
  // Sub-block j (elements [32j, 32j + 32)) as 8 words of int8 levels, its 16-group scales and
  // 16-group min multipliers (the tensor-core kernel's view of the block).
  __device__ static void Levels32(const uint8_t* blk, int j, uint32_t* w, int* sc, int* mn) {
    const uint32_t* qs = reinterpret_cast<const uint32_t*>(blk + (kFive ? 48 : 16) + 32 * (j / 2));
    const uint32_t* qh = reinterpret_cast<const uint32_t*>(blk + 16);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t v = (qs[i] >> (4 * (j & 1))) & 0x0F0F0F0Fu;
      if (kFive) v |= ((qh[i] >> j) & 0x01010101u) << 4;
      w[i] = v;
    }
    const uint4 head = *reinterpret_cast<const uint4*>(blk);
    const uint32_t s[3] = {head.y, head.z, head.w};
    int scale, m;
    ScaleMin(s, j, &scale, &m);
    sc[0] = sc[1] = scale;
    mn[0] = mn[1] = m;
  }
  __device__ static void Scales(const uint8_t* blk, float* d, float* dmin) {
    const uint32_t h = *reinterpret_cast<const uint32_t*>(blk);
    *d = Half(h);
    *dmin = Half(h >> 16);
  }
  __device__ static float Contribution(const Part& p, float dx, int isum, int imin) {
    return CombineMin(p.d, p.dmin, dx, isum, imin);
  }
};

// Q6_K: lane t holds elements [64t, 64t + 64): half t / 2, 2-bit planes k = 2 (t % 2) + s.
struct Q6K {
  static constexpr int kElems = 256, kBytes = 210, kUnroll = 2;
  static constexpr bool kMin = false;
  struct Part {
    int v[16];  // levels 0..63 (the -32 is applied through the activation sums)
    int sc[4];
    float d;
  };
  __device__ static void Load(const uint8_t* blk, int t, Part& p) {
    const int half = t >> 1, odd = t & 1;
    const uint8_t* ql = blk + 64 * half;
    const uint8_t* qh = blk + 128 + 32 * half;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t a = static_cast<uint32_t>(Word2(ql + 4 * i));
      const uint32_t c = static_cast<uint32_t>(Word2(ql + 32 + 4 * i));
      const uint32_t h = static_cast<uint32_t>(Word2(qh + 4 * i));
      const uint32_t n0 = (odd ? a >> 4 : a) & 0x0F0F0F0Fu, n1 = (odd ? c >> 4 : c) & 0x0F0F0F0Fu;
      p.v[i] = static_cast<int>(n0 | (((h >> (4 * odd)) & 0x03030303u) << 4));
      p.v[8 + i] = static_cast<int>(n1 | (((h >> (4 * odd + 2)) & 0x03030303u) << 4));
    }
    const uint32_t sc = static_cast<uint32_t>(Word2(blk + 192 + 4 * t));
#pragma unroll
    for (int i = 0; i < 4; ++i) p.sc[i] = static_cast<int8_t>(ByteOf(sc, i));
    p.d = Half(static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(blk + 208)));
  }
  __device__ static void Dot(const Part& p, const int8_t* q, const int16_t* bsum, int t, int* isum,
                             int*) {
    int xw[16];
    LoadQuarter(q + 64 * t, xw);
    const int2 bs = *reinterpret_cast<const int2*>(bsum + 4 * t);
    const int sums[4] = {static_cast<int16_t>(bs.x & 0xFFFF), static_cast<int16_t>(bs.x >> 16),
                         static_cast<int16_t>(bs.y & 0xFFFF), static_cast<int16_t>(bs.y >> 16)};
    int total = 0;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      int s = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) s = __dp4a(p.v[4 * g + i], xw[4 * g + i], s);
      total += p.sc[g] * (s - 32 * sums[g]);
    }
    *isum = total;
  }
  __device__ static float Contribution(const Part& p, float dx, int isum, int) {
    return Combine(p.d, dx, isum);
  }
  // Sub-block j: levels q - 32 (signed, so no activation-sum correction), scales of groups 2j
  // and 2j + 1.
  __device__ static void Levels32(const uint8_t* blk, int j, uint32_t* w, int* sc, int* mn) {
    const int half = j / 4, k = j % 4;
    const uint8_t* ql = blk + 64 * half + 32 * (k & 1);
    const uint8_t* qh = blk + 128 + 32 * half;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo =
          (static_cast<uint32_t>(Word2(ql + 4 * i)) >> (4 * (k >> 1))) & 0x0F0F0F0Fu;
      const uint32_t hi = ((static_cast<uint32_t>(Word2(qh + 4 * i)) >> (2 * k)) & 0x03030303u)
                          << 4;
      w[i] = __vsub4(lo | hi, 0x20202020u);
    }
    const uint32_t s = *reinterpret_cast<const uint16_t*>(blk + 192 + 2 * j);
    sc[0] = static_cast<int8_t>(s & 0xFF);
    sc[1] = static_cast<int8_t>(s >> 8);
    mn[0] = mn[1] = 0;
  }
  __device__ static void Scales(const uint8_t* blk, float* d, float* dmin) {
    *d = Half(*reinterpret_cast<const uint16_t*>(blk + 208));
    *dmin = 0.0f;
  }
};

// Q8_0: lane t holds bytes [8t, 8t + 8) of the 32 levels.
struct Q80 {
  static constexpr int kElems = 32, kBytes = 34, kUnroll = 4;
  static constexpr bool kMin = false;
  struct Part {
    int w0, w1;
    float d;
  };
  __device__ static void Load(const uint8_t* blk, int t, Part& p) {
    p.d = Half(*reinterpret_cast<const uint16_t*>(blk));
    p.w0 = Word2(blk + 2 + 8 * t);
    p.w1 = Word2(blk + 6 + 8 * t);
  }
  __device__ static void Dot(const Part& p, const int8_t* q, const int16_t*, int t, int* isum,
                             int*) {
    const int2 x = *reinterpret_cast<const int2*>(q + 8 * t);
    *isum = __dp4a(p.w1, x.y, __dp4a(p.w0, x.x, 0));
  }
  __device__ static float Contribution(const Part& p, float dx, int isum, int) {
    return Combine(p.d, dx, isum);
  }
  __device__ static void Levels32(const uint8_t* blk, int, uint32_t* w, int* sc, int* mn) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = static_cast<uint32_t>(Word2(blk + 2 + 4 * i));
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
  }
  __device__ static void Scales(const uint8_t* blk, float* d, float* dmin) {
    *d = Half(*reinterpret_cast<const uint16_t*>(blk));
    *dmin = 0.0f;
  }
};

// Q4_0: lane t holds qs bytes [4t, 4t + 4): elements 4t.. (low nibbles) and 16 + 4t.. (high).
struct Q40 {
  static constexpr int kElems = 32, kBytes = 18, kUnroll = 4;
  static constexpr bool kMin = false;
  struct Part {
    int lo, hi;
    float d;
  };
  __device__ static void Load(const uint8_t* blk, int t, Part& p) {
    p.d = Half(*reinterpret_cast<const uint16_t*>(blk));
    const uint32_t q = static_cast<uint32_t>(Word2(blk + 2 + 4 * t));
    p.lo = static_cast<int>(__vsub4(q & 0x0F0F0F0Fu, 0x08080808u));
    p.hi = static_cast<int>(__vsub4((q >> 4) & 0x0F0F0F0Fu, 0x08080808u));
  }
  __device__ static void Dot(const Part& p, const int8_t* q, const int16_t*, int t, int* isum,
                             int*) {
    const int x_lo = *reinterpret_cast<const int*>(q + 4 * t);
    const int x_hi = *reinterpret_cast<const int*>(q + 16 + 4 * t);
    *isum = __dp4a(p.hi, x_hi, __dp4a(p.lo, x_lo, 0));
  }
  __device__ static float Contribution(const Part& p, float dx, int isum, int) {
    return Combine(p.d, dx, isum);
  }
  __device__ static void Levels32(const uint8_t* blk, int, uint32_t* w, int* sc, int* mn) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t q = static_cast<uint32_t>(Word2(blk + 2 + 4 * i));
      w[i] = __vsub4(q & 0x0F0F0F0Fu, 0x08080808u);
      w[4 + i] = __vsub4((q >> 4) & 0x0F0F0F0Fu, 0x08080808u);
    }
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
  }
  __device__ static void Scales(const uint8_t* blk, float* d, float* dmin) {
    *d = Half(*reinterpret_cast<const uint16_t*>(blk));
    *dmin = 0.0f;
  }
};

// Q5_0's fifth bits of 4 consecutive elements (bits 0..3 of `bits`) as bit 4 of each byte.
__device__ __forceinline__ uint32_t FifthBits(uint32_t bits) {
  return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

// Q5_0 (d, 32 fifth bits, 16 nibble bytes): levels (nibble | fifth bit << 4) - 16, signed, so
// no min term, as quant/dot_portable_extra.cpp's DotQ5_0. Once loaded it is Q4_0 (the same lane
// layout, activations, dot, scale and contribution); only the block size and the level words
// differ.
struct Q50 : Q40 {
  static constexpr int kBytes = 22;
  // Word i of the block's levels: i < 4 elements 4i.., else 16 + 4(i - 4)...
  __device__ static uint32_t Word(const uint8_t* blk, uint32_t qh, int i) {
    const uint32_t q = static_cast<uint32_t>(Word2(blk + 6 + 4 * (i & 3)));
    const uint32_t nib = (i < 4 ? q : q >> 4) & 0x0F0F0F0Fu;
    return __vsub4(nib | FifthBits((qh >> (4 * i)) & 0xFu), 0x10101010u);
  }
  __device__ static void Load(const uint8_t* blk, int t, Part& p) {
    p.d = Half(*reinterpret_cast<const uint16_t*>(blk));
    const uint32_t qh = static_cast<uint32_t>(Word2(blk + 2));
    p.lo = static_cast<int>(Word(blk, qh, t));
    p.hi = static_cast<int>(Word(blk, qh, 4 + t));
  }
  __device__ static void Levels32(const uint8_t* blk, int, uint32_t* w, int* sc, int* mn) {
    const uint32_t qh = static_cast<uint32_t>(Word2(blk + 2));
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = Word(blk, qh, i);
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
  }
};

}  // namespace intq

// Calls f(Format{}) for the formats on the integer path; returns false for the others.
template <class Fn>
bool DispatchIntFormat(DType t, Fn&& f) {
  switch (t) {
    case DType::Q4_K:
      f(intq::K45<false>{});
      return true;
    case DType::Q5_K:
      f(intq::K45<true>{});
      return true;
    case DType::Q6_K:
      f(intq::Q6K{});
      return true;
    case DType::Q8_0:
      f(intq::Q80{});
      return true;
    case DType::Q4_0:
      f(intq::Q40{});
      return true;
    case DType::Q5_0:
      f(intq::Q50{});
      return true;
    default:
      return false;
  }
}

}  // namespace lockstep::backend::cuda

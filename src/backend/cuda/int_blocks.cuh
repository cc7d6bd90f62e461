// Device side of the integer matmul path: quantized activation rows and, per weight format, a
// lane's share of one block's exact integer sums and the block's float contribution, written as
// quant/dot_portable.cpp writes them (same integers, same float expression).
//
// A block is handled by a group of 4 lanes: lane t (0..3) loads its quarter of the weight block
// as raw words (LoadRaw: only loads, so a lane can have several blocks in flight), turns them
// into levels and scales (Unpack), multiplies them with its quarter of each activation row (Dot,
// dp4a on int8 levels), the group adds its 4 integer partials (exact, so which lane holds which
// elements is free), and Contribution turns the block's integers into the float that the CPU
// adds to partial sum b % 8.
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
// One 256-block of a quantized activation row as 16-byte units c = 0..15 (levels 16c ..
// 16c + 15): in global memory in order, or staged in shared memory (matmul_int_staged.cuh) with
// the format's swizzle, so that the 8 lanes of a quarter warp (groups 2j and 2j + 1, blocks of
// both parities) read 8 different bank quads in each of the format's loads.
struct GlobalLevels {
  const int4* q;
  __device__ int4 Unit(int c) const { return q[c]; }
};
// Unit c of a block of parity p at (c & 8) | (c & 7) ^ (c / 8) * kSwz ^ p: a permutation inside
// each half of the block.
template <int kSwz>
__device__ __forceinline__ int SwizzledUnit(int c, int p) {
  return (c & 8) | ((c & 7) ^ ((c >> 3) * kSwz) ^ p);
}
template <int kSwz>
struct SharedLevels {
  const int4* q;  // the block's 16 units
  int p;          // block index & 1
  __device__ int4 Unit(int c) const { return q[SwizzledUnit<kSwz>(c, p)]; }
};
// Units c0, c0 + 1, ... as kUnits * 4 activation words (4 levels each).
template <int kUnits, class L>
__device__ __forceinline__ void LoadUnits(const L& lv, int c0, int* xw) {
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int4 v = lv.Unit(c0 + i);
    xw[4 * i] = v.x, xw[4 * i + 1] = v.y, xw[4 * i + 2] = v.z, xw[4 * i + 3] = v.w;
  }
}

// Q4_K / Q5_K: lane t holds sub-blocks 2t (low nibbles of qs[32t ..]) and 2t + 1 (high).
template <bool kFive>
struct K45 {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144, kUnroll = kFive ? 2 : 4;
  static constexpr bool kMin = true;
  // Lane t reads units 4t + i at load i: units i, 4 + i, 8 + i, 12 + i of one block.
  static constexpr int kSwizzle = 2;
  struct Part {
    int lo[8], hi[8];
    int sc0, sc1, m0, m1;
    float d, dmin;
  };
  // quant::detail::ScaleMinK4 over the 12 scale bytes held in words s4, s8 (bytes 4..11 and
  // 8..15 of the block, i.e. scale bytes 0..3 in s[0], 4..7 in s[1], 8..11 in s[2]).
  __device__ static void ScaleMin(const uint32_t* s, int j, int* sc, int* m) {
    // Words picked by comparison, not by index: j varies by lane, and an indexed array would
    // live in local memory.
    const auto b = [&](int i) {
      const uint32_t word = i < 4 ? s[0] : i < 8 ? s[1] : s[2];
      return static_cast<int>(ByteOf(word, i & 3));
    };
    if (j < 4) {
      *sc = b(j) & 63;
      *m = b(j + 4) & 63;
    } else {
      *sc = (b(j + 4) & 0xF) | ((b(j - 4) >> 6) << 4);
      *m = (b(j + 4) >> 4) | ((b(j) >> 6) << 4);
    }
  }
  // The block's head (d, dmin, 12 scale bytes), lane t's 32 nibble bytes and Q5_K's 32 bytes of
  // fifth bits.
  struct Raw {
    uint4 head, q0, q1, h0, h1;
  };
  __device__ static void LoadRaw(const uint8_t* blk, int t, Raw& r) {
    r.head = *reinterpret_cast<const uint4*>(blk);
    const uint4* qs = reinterpret_cast<const uint4*>(blk + (kFive ? 48 : 16) + 32 * t);
    r.q0 = qs[0], r.q1 = qs[1];
    if (kFive) {
      const uint4* qh = reinterpret_cast<const uint4*>(blk + 16);
      r.h0 = qh[0], r.h1 = qh[1];
    }
  }
  __device__ static void Unpack(const Raw& r, int t, Part& p) {
    p.d = Half(r.head.x);
    p.dmin = Half(r.head.x >> 16);
    const uint32_t s[3] = {r.head.y, r.head.z, r.head.w};
    ScaleMin(s, 2 * t, &p.sc0, &p.m0);
    ScaleMin(s, 2 * t + 1, &p.sc1, &p.m1);
    const uint32_t q[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
    uint32_t h[8] = {};
    if (kFive) {
      const uint32_t hw[8] = {r.h0.x, r.h0.y, r.h0.z, r.h0.w, r.h1.x, r.h1.y, r.h1.z, r.h1.w};
      for (int i = 0; i < 8; ++i) h[i] = hw[i];
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
  template <class L>
  __device__ static void Dot(const Part& p, const L& lv, const int16_t* bsum, int t, int* isum,
                             int* imin) {
    int xw[16];
    LoadUnits<4>(lv, 4 * t, xw);
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
  __device__ static float Contribution(const Part& p, float dx, int isum, int imin) {
    return CombineMin(p.d, p.dmin, dx, isum, imin);
  }
};

// Q6_K: lane t = 2 h + o holds ql bytes [64 h + 32 o, +32) of half h, whose low nibbles are
// elements 128 h + 32 o + [0, 32) (groups 8 h + 2 o, +1; qh bits 2 o) and whose high nibbles are
// 64 elements further on (groups 8 h + 4 + 2 o, +1; qh bits 4 + 2 o), with qh bytes [32 h, +32).
struct Q6K {
  static constexpr int kElems = 256, kBytes = 210, kUnroll = 2;
  static constexpr bool kMin = false;
  // Lane t = 2 h + o reads units 8 h + 2 o + i and 8 h + 4 + 2 o + i at load i (0, 1): units
  // i, 2 + i, 8 + i, 10 + i, then 4 + i, 6 + i, 12 + i, 14 + i of one block.
  static constexpr int kSwizzle = 4;
  // Blocks are 210 bytes, so only 2-byte aligned: 9 aligned words cover each 32-byte range and
  // Unpack shifts them into place (the ninth word is still inside the block).
  struct Raw {
    uint32_t ql[9], qh[9], sc_lo, sc_hi, d, shift;
  };
  struct Part {
    int lo[8], hi[8];  // levels 0..63 (the -32 is applied through the activation sums)
    int sc[4];         // groups 8 h + 2 o, +1, 8 h + 4 + 2 o, +1
    float d;
  };
  __device__ static void LoadRaw(const uint8_t* blk, int t, Raw& r) {
    const int half = t >> 1, odd = t & 1;
    const auto addr = reinterpret_cast<uintptr_t>(blk);
    const auto* base = reinterpret_cast<const uint32_t*>(addr & ~uintptr_t{3});
    const uint32_t* ql = base + (64 * half + 32 * odd) / 4;
    const uint32_t* qh = base + (128 + 32 * half) / 4;
#pragma unroll
    for (int i = 0; i < 9; ++i) r.ql[i] = ql[i], r.qh[i] = qh[i];
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(blk + 192 + 8 * half + 2 * odd);
    r.sc_lo = sc[0], r.sc_hi = sc[2];
    r.d = *reinterpret_cast<const uint16_t*>(blk + 208);
    r.shift = static_cast<uint32_t>(addr & 2) * 8;
  }
  __device__ static void Unpack(const Raw& r, int t, Part& p) {
    const int odd = t & 1;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t l = __funnelshift_r(r.ql[i], r.ql[i + 1], r.shift);
      const uint32_t h = __funnelshift_r(r.qh[i], r.qh[i + 1], r.shift);
      p.lo[i] = static_cast<int>((l & 0x0F0F0F0Fu) | (((h >> (2 * odd)) & 0x03030303u) << 4));
      p.hi[i] =
          static_cast<int>(((l >> 4) & 0x0F0F0F0Fu) | (((h >> (4 + 2 * odd)) & 0x03030303u) << 4));
    }
    p.sc[0] = static_cast<int8_t>(r.sc_lo & 0xFF), p.sc[1] = static_cast<int8_t>(r.sc_lo >> 8);
    p.sc[2] = static_cast<int8_t>(r.sc_hi & 0xFF), p.sc[3] = static_cast<int8_t>(r.sc_hi >> 8);
    p.d = Half(r.d);
  }
  template <class L>
  __device__ static void Dot(const Part& p, const L& lv, const int16_t* bsum, int t, int* isum,
                             int*) {
    const int half = t >> 1, odd = t & 1;
    int xw[16];
    LoadUnits<2>(lv, 8 * half + 2 * odd, xw);
    LoadUnits<2>(lv, 8 * half + 4 + 2 * odd, xw + 8);
    const int bs_lo = *reinterpret_cast<const int*>(bsum + 8 * half + 2 * odd);
    const int bs_hi = *reinterpret_cast<const int*>(bsum + 8 * half + 4 + 2 * odd);
    const int sums[4] = {static_cast<int16_t>(bs_lo & 0xFFFF), static_cast<int16_t>(bs_lo >> 16),
                         static_cast<int16_t>(bs_hi & 0xFFFF), static_cast<int16_t>(bs_hi >> 16)};
    int total = 0;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const int* v = g < 2 ? p.lo + 4 * g : p.hi + 4 * (g - 2);
      int s = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) s = __dp4a(v[i], xw[4 * g + i], s);
      total += p.sc[g] * (s - 32 * sums[g]);
    }
    *isum = total;
  }
  __device__ static float Contribution(const Part& p, float dx, int isum, int) {
    return Combine(p.d, dx, isum);
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
  using Raw = Part;  // loaded as used: nothing to unpack
  __device__ static void Unpack(const Raw& r, int, Part& p) { p = r; }
  __device__ static void LoadRaw(const uint8_t* blk, int t, Part& p) {
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
  __device__ static void Levels32(const uint8_t* blk, uint32_t* w, int* sc) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = static_cast<uint32_t>(Word2(blk + 2 + 4 * i));
    sc[0] = sc[1] = 1;
  }
  __device__ static float Scale(const uint8_t* blk) {
    return Half(*reinterpret_cast<const uint16_t*>(blk));
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
  using Raw = Part;  // loaded as used: nothing to unpack
  __device__ static void Unpack(const Raw& r, int, Part& p) { p = r; }
  __device__ static void LoadRaw(const uint8_t* blk, int t, Part& p) {
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
  __device__ static void Levels32(const uint8_t* blk, uint32_t* w, int* sc) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t q = static_cast<uint32_t>(Word2(blk + 2 + 4 * i));
      w[i] = __vsub4(q & 0x0F0F0F0Fu, 0x08080808u);
      w[4 + i] = __vsub4((q >> 4) & 0x0F0F0F0Fu, 0x08080808u);
    }
    sc[0] = sc[1] = 1;
  }
  __device__ static float Scale(const uint8_t* blk) {
    return Half(*reinterpret_cast<const uint16_t*>(blk));
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
  __device__ static void LoadRaw(const uint8_t* blk, int t, Part& p) {
    p.d = Half(*reinterpret_cast<const uint16_t*>(blk));
    const uint32_t qh = static_cast<uint32_t>(Word2(blk + 2));
    p.lo = static_cast<int>(Word(blk, qh, t));
    p.hi = static_cast<int>(Word(blk, qh, 4 + t));
  }
  __device__ static void Levels32(const uint8_t* blk, uint32_t* w, int* sc) {
    const uint32_t qh = static_cast<uint32_t>(Word2(blk + 2));
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = Word(blk, qh, i);
    sc[0] = sc[1] = 1;
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

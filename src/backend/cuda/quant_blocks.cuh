// Device decoders of GGUF block formats, 32 consecutive elements ("a chunk") at a time. Each
// decoder repeats the arithmetic of quant/'s host DequantizeRow in the same order (the build
// forbids contraction), so a chunk decodes to the same floats on the GPU as on the CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::backend::cuda {

inline constexpr int kChunk = 32;

__device__ __forceinline__ float LoadHalf(const uint8_t* p) {
  const uint16_t bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ uint32_t Load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// float(q) for |q| < 2^22 without a conversion instruction (those issue at a quarter of the
// float rate and bound the quantized decoders): q added into the mantissa of 1.5 * 2^23, then
// that constant subtracted. Both steps are exact, so the value is static_cast<float>(q).
__device__ __forceinline__ float SmallIntToFloat(int q) {
  return __int_as_float(0x4B400000 + q) - 12582912.0f;
}

// The 16-entry int8 tables of IQ4_NL / IQ4_XS and MXFP4 packed four bytes to a word: looked
// up with byte permutes in registers (a table in memory indexed by per-lane nibbles would
// serialize the warp's loads).
struct Table16 {
  uint32_t w0, w1, w2, w3;
};
inline constexpr Table16 kIq4nlTable{0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u};
inline constexpr Table16 kMxfp4Table{0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu};

__device__ __forceinline__ float Lookup(Table16 t, uint32_t nibble) {
  const uint32_t lo = __byte_perm(t.w0, t.w1, nibble & 7), hi = __byte_perm(t.w2, t.w3, nibble & 7);
  return SmallIntToFloat(static_cast<int8_t>((nibble & 8 ? hi : lo) & 0xFF));
}

// One format: elements and bytes per block, and Decode(block, sub, v) writing the 32 elements
// of sub-chunk `sub` of the block.
template <DType T>
struct Fmt;

template <>
struct Fmt<DType::F32> {
  static constexpr int kElems = 32, kBytes = 128;
  __device__ static float Elem(const uint8_t* row, int64_t i) {
    return reinterpret_cast<const float*>(row)[i];
  }
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float4* p = reinterpret_cast<const float4*>(b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 f = p[i];
      v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
    }
  }
};

template <>
struct Fmt<DType::F16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static float Elem(const uint8_t* row, int64_t i) { return LoadHalf(row + 2 * i); }
  // Rows start 16-byte aligned (k is a multiple of 32), so a chunk is four 16-byte loads.
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const uint4* p = reinterpret_cast<const uint4*>(b);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = p[i];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __half2float(__ushort_as_half(static_cast<uint16_t>(w[j] & 0xFFFF)));
        v[8 * i + 2 * j + 1] = __half2float(__ushort_as_half(static_cast<uint16_t>(w[j] >> 16)));
      }
    }
  }
};

template <>
struct Fmt<DType::BF16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static float Elem(const uint8_t* row, int64_t i) {
    return __uint_as_float(static_cast<uint32_t>(row[2 * i] | (row[2 * i + 1] << 8)) << 16);
  }
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const uint4* p = reinterpret_cast<const uint4*>(b);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = p[i];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
        v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
      }
    }
  }
};

template <>
struct Fmt<DType::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b);
#pragma unroll
    for (int j = 0; j < 32; ++j) v[j] = SmallIntToFloat(static_cast<int8_t>(b[2 + j])) * d;
  }
};

template <>
struct Fmt<DType::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = SmallIntToFloat((qs[j] & 0xF) - 8) * d;
      v[j + 16] = SmallIntToFloat((qs[j] >> 4) - 8) * d;
    }
  }
};

template <>
struct Fmt<DType::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b), m = LoadHalf(b + 2);
    const uint8_t* qs = b + 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = SmallIntToFloat(qs[j] & 0xF) * d + m;
      v[j + 16] = SmallIntToFloat(qs[j] >> 4) * d + m;
    }
  }
};

template <>
struct Fmt<DType::Q5_0> {
  static constexpr int kElems = 32, kBytes = 22;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b);
    const uint32_t qh = Load32(b + 2);
    const uint8_t* qs = b + 6;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      v[j] = SmallIntToFloat(((qs[j] & 0xF) | h0) - 16) * d;
      v[j + 16] = SmallIntToFloat(((qs[j] >> 4) | h1) - 16) * d;
    }
  }
};

template <>
struct Fmt<DType::Q5_1> {
  static constexpr int kElems = 32, kBytes = 24;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b), m = LoadHalf(b + 2);
    const uint32_t qh = Load32(b + 4);
    const uint8_t* qs = b + 8;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      v[j] = SmallIntToFloat((qs[j] & 0xF) | h0) * d + m;
      v[j + 16] = SmallIntToFloat((qs[j] >> 4) | h1) * d + m;
    }
  }
};

template <>
struct Fmt<DType::IQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = LoadHalf(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = d * Lookup(kIq4nlTable, qs[j] & 0xF);
      v[j + 16] = d * Lookup(kIq4nlTable, qs[j] >> 4);
    }
  }
};

// E8M0 exponent byte to float, halved (MXFP4 values are stored doubled).
__device__ __forceinline__ float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return __uint_as_float(bits);
}

template <>
struct Fmt<DType::MXFP4> {
  static constexpr int kElems = 32, kBytes = 17;
  __device__ static void Decode(const uint8_t* b, int, float* v) {
    const float d = E8M0Half(b[0]);
    const uint8_t* qs = b + 1;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = Lookup(kMxfp4Table, qs[j] & 0xF) * d;
      v[j + 16] = Lookup(kMxfp4Table, qs[j] >> 4) * d;
    }
  }
};

// K-quant 6-bit scale/min pair j (0..7) of the 12-byte packed scales of Q4_K / Q5_K.
__device__ __forceinline__ void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

template <>
struct Fmt<DType::Q4_K> {
  static constexpr int kElems = 256, kBytes = 144;
  __device__ static void Decode(const uint8_t* b, int sub, float* v) {
    const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
    int s, m;
    ScaleMinK4(sub, b + 4, &s, &m);
    const float dl = d * static_cast<float>(s), ml = dmin * static_cast<float>(m);
    // Blocks are 144 bytes and rows 16-byte aligned: the 32 quant bytes are two 16-byte loads.
    const uint4* q = reinterpret_cast<const uint4*>(b + 16 + 32 * (sub / 2));
    const int shift = 4 * (sub & 1);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 u = q[h];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const uint32_t byte = (w[l / 4] >> (8 * (l % 4))) & 0xFF;
        v[16 * h + l] = dl * SmallIntToFloat(static_cast<int>((byte >> shift) & 0xF)) - ml;
      }
    }
  }
};

template <>
struct Fmt<DType::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176;
  __device__ static void Decode(const uint8_t* b, int sub, float* v) {
    const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
    int s, m;
    ScaleMinK4(sub, b + 4, &s, &m);
    const float dl = d * static_cast<float>(s), ml = dmin * static_cast<float>(m);
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48 + 32 * (sub / 2);
    const int shift = 4 * (sub & 1);
    const uint8_t bit = static_cast<uint8_t>(1u << sub);
#pragma unroll
    for (int l = 0; l < 32; ++l)
      v[l] = dl * SmallIntToFloat(((ql[l] >> shift) & 0xF) + ((qh[l] & bit) ? 16 : 0)) - ml;
  }
};

template <>
struct Fmt<DType::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static void Decode(const uint8_t* b, int sub, float* v) {
    const int half = sub / 4, k = sub % 4;
    const uint8_t* ql = b + 64 * half + (k & 1) * 32;
    const uint8_t* qh = b + 128 + 32 * half;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half;
    const float d = LoadHalf(b + 208);
    const int lshift = (k >> 1) * 4, hshift = 2 * k;
    // (d * scale) * q as the host decoder groups it; the two scales of the chunk computed once.
    const float ds[2] = {d * SmallIntToFloat(sc[2 * k]), d * SmallIntToFloat(sc[1 + 2 * k])};
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = (((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
      v[l] = ds[l / 16] * SmallIntToFloat(q);
    }
  }
};

template <>
struct Fmt<DType::IQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136;
  __device__ static void Decode(const uint8_t* b, int sub, float* v) {
    const float d = LoadHalf(b);
    const uint16_t scales_h = static_cast<uint16_t>(b[2] | (b[3] << 8));
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8 + 16 * sub;
    const int ls =
        ((scales_l[sub / 2] >> (4 * (sub % 2))) & 0xF) | (((scales_h >> (2 * sub)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = dl * Lookup(kIq4nlTable, qs[j] & 0xF);
      v[j + 16] = dl * Lookup(kIq4nlTable, qs[j] >> 4);
    }
  }
};

// Chunk c (elements [32c, 32c + 32)) of a row of format F.
template <class F>
__device__ __forceinline__ void DecodeChunk(const uint8_t* row, int64_t c, float* v) {
  constexpr int kPerBlock = F::kElems / kChunk;
  const int64_t block = c / kPerBlock;
  F::Decode(row + block * F::kBytes, static_cast<int>(c % kPerBlock), v);
}

// Calls f(Fmt<T>{}) for the float formats, the only ones whose rows may have any length (the
// others are whole blocks of 32 or 256); returns false for the others.
template <class Fn>
bool DispatchFloatFormat(DType t, Fn&& f) {
  switch (t) {
    case DType::F32:
      f(Fmt<DType::F32>{});
      return true;
    case DType::F16:
      f(Fmt<DType::F16>{});
      return true;
    case DType::BF16:
      f(Fmt<DType::BF16>{});
      return true;
    default:
      return false;
  }
}

// Calls f(Fmt<T>{}) for the formats with a native kernel; returns false for the others.
template <class Fn>
bool DispatchFormat(DType t, Fn&& f) {
  switch (t) {
#define LS_CASE(T)      \
  case DType::T:        \
    f(Fmt<DType::T>{}); \
    return true;
    LS_CASE(F32)
    LS_CASE(F16)
    LS_CASE(BF16)
    LS_CASE(Q8_0)
    LS_CASE(Q4_0)
    LS_CASE(Q4_1)
    LS_CASE(Q5_0)
    LS_CASE(Q5_1)
    LS_CASE(IQ4_NL)
    LS_CASE(MXFP4)
    LS_CASE(Q4_K)
    LS_CASE(Q5_K)
    LS_CASE(Q6_K)
    LS_CASE(IQ4_XS)
#undef LS_CASE
    default:
      return false;
  }
}

}  // namespace lockstep::backend::cuda

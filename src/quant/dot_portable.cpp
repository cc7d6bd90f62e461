// Portable dot kernels: integer block sums against Q8 activations, float kernels for F32/F16/
// BF16. These define the results; dot_avx2.cpp must reproduce them bit for bit.
#include "core/half.h"
#include "quant/dot_extra.h"
#include "quant/dot_internal.h"
#include "quant/iq_tables.h"
#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

inline float ActScale(const uint8_t* blk) {
  float d;
  std::memcpy(&d, blk, 4);
  return d;
}
inline const int8_t* ActQ(const uint8_t* blk) {
  return reinterpret_cast<const int8_t*>(blk + 4);
}
inline int32_t ActBsum(const uint8_t* blk, int g) {
  return static_cast<int16_t>(Load16(blk + 260 + 2 * g));
}

// F32/F16/BF16 weights: lane k of 8 accumulates elements i with i % 8 == k, like DotF32.
template <float (*Load)(const uint8_t*), int kBytes>
float FloatDot(const uint8_t* w, const PreparedRow& x) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float* a = x.f32.data();
  for (int64_t i = 0; i < x.n; ++i) acc[i & 7] += Load(w + kBytes * i) * a[i];
  const float s0 = (acc[0] + acc[4]) + (acc[1] + acc[5]);
  const float s1 = (acc[2] + acc[6]) + (acc[3] + acc[7]);
  return s0 + s1;
}
float LoadF32(const uint8_t* p) {
  return BitsToFloat(Load32(p));
}
float LoadBf16(const uint8_t* p) {
  return BF16ToFloat(Load16(p));
}

// 32-element blocks whose weight level is a lookup of a nibble (low nibble j, high j+16).
template <int kBlockBytes, int kQsOffset, float (*Scale)(const uint8_t*), int8_t (*Level)(int)>
float NibbleDot(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * kBlockBytes;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const int8_t* xq = ActQ(xb);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += Level(wb[kQsOffset + j] & 0xF) * xq[j] + Level(wb[kQsOffset + j] >> 4) * xq[j + 16];
    acc.Add(b, Combine(Scale(wb), ActScale(xb), isum));
  }
  return acc.Sum();
}
int8_t LevelQ4_0(int v) {
  return static_cast<int8_t>(v - 8);
}
int8_t LevelIq4(int v) {
  return tables::kIq4nlValues[v];
}
int8_t LevelMxfp4(int v) {
  return tables::kMxfp4Values[v];
}
float ScaleMxfp4(const uint8_t* b) {
  return E8M0Half(b[0]);
}

float DotQ8_0(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * 34;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const int8_t* xq = ActQ(xb);
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += static_cast<int8_t>(wb[2 + j]) * xq[j];
    acc.Add(b, Combine(LoadHalf(wb), ActScale(xb), isum));
  }
  return acc.Sum();
}

float DotQ2_K(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 84;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const int8_t* xq = ActQ(xb);
    int32_t isum = 0, imin = 0;
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q = (wb[16 + 32 * half + l] >> (2 * s)) & 3;
      isum += (wb[e / 16] & 0xF) * q * xq[e];
    }
    for (int g = 0; g < 16; ++g) imin += (wb[g] >> 4) * ActBsum(xb, g);
    acc.Add(b, CombineMin(LoadHalf(wb + 80), LoadHalf(wb + 82), ActScale(xb), isum, imin));
  }
  return acc.Sum();
}

float DotQ3_K(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 110;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const int8_t* xq = ActQ(xb);
    int8_t sc[16];
    for (int i = 0; i < 16; ++i) {
      const int lo = i < 8 ? (wb[96 + i] & 0xF) : (wb[96 + i - 8] >> 4);
      const int hi = (wb[104 + (i & 3)] >> (2 * (i >> 2))) & 3;
      sc[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * g + i, half = e / 128, sh = (e % 128) / 32, l = e % 32;
        const int low = (wb[32 + 32 * half + l] >> (2 * sh)) & 3;
        const int q = low - ((wb[l] >> (e / 32)) & 1 ? 0 : 4);
        s += q * xq[e];
      }
      isum += sc[g] * s;
    }
    acc.Add(b, Combine(LoadHalf(wb + 108), ActScale(xb), isum));
  }
  return acc.Sum();
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min.
template <bool kFive>
float DotQ45_K(const uint8_t* w, const PreparedRow& x) {
  constexpr int kBytes = kFive ? 176 : 144;
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * kBytes;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const int8_t* xq = ActQ(xb);
    const uint8_t* qs = wb + (kFive ? 48 : 16);
    int32_t isum = 0, imin = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, wb + 4, &sc, &m);
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        if (kFive) q |= ((wb[16 + l] >> j) & 1) << 4;
        s += q * xq[32 * j + l];
      }
      isum += sc * s;
      imin += m * (ActBsum(xb, 2 * j) + ActBsum(xb, 2 * j + 1));
    }
    acc.Add(b, CombineMin(LoadHalf(wb), LoadHalf(wb + 2), ActScale(xb), isum, imin));
  }
  return acc.Sum();
}

float DotQ6_K(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 210;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const int8_t* xq = ActQ(xb);
    const auto* sc = reinterpret_cast<const int8_t*>(wb + 192);
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * g + i, half = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t* ql = wb + 64 * half;
        const uint8_t qh = wb[128 + 32 * half + l];
        const int lo = (k & 1) ? ql[l + 32] : ql[l];
        const int q = (((k < 2) ? (lo & 0xF) : (lo >> 4)) | (((qh >> (2 * k)) & 3) << 4)) - 32;
        s += q * xq[e];
      }
      isum += sc[g] * s;
    }
    acc.Add(b, Combine(LoadHalf(wb + 208), ActScale(xb), isum));
  }
  return acc.Sum();
}

float DotIq4Xs(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 256; ++b) {
    const uint8_t* wb = w + b * 136;
    const uint8_t* xb = x.q.data() + b * kQ8x256Bytes;
    const int8_t* xq = ActQ(xb);
    const uint16_t sh = Load16(wb + 2);
    int32_t isum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((wb[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      const uint8_t* qs = wb + 8 + 16 * ib;
      int32_t s = 0;
      for (int j = 0; j < 16; ++j)
        s += tables::kIq4nlValues[qs[j] & 0xF] * xq[32 * ib + j] +
             tables::kIq4nlValues[qs[j] >> 4] * xq[32 * ib + j + 16];
      isum += (ls - 32) * s;
    }
    acc.Add(b, Combine(LoadHalf(wb), ActScale(xb), isum));
  }
  return acc.Sum();
}

}  // namespace

ActFormat ActivationFormat(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::IQ4_NL:
    case DType::MXFP4:
      return ActFormat::kQ8x32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return ActFormat::kQ8x256;
    default:
      return ActivationFormatExtra(t);
  }
}

RowDotFn PortableDot(DType t) {
  switch (t) {
    case DType::F32:
      return FloatDot<LoadF32, 4>;
    case DType::F16:
      return FloatDot<LoadHalf, 2>;
    case DType::BF16:
      return FloatDot<LoadBf16, 2>;
    case DType::Q8_0:
      return DotQ8_0;
    case DType::Q4_0:
      return NibbleDot<18, 2, LoadHalf, LevelQ4_0>;
    case DType::IQ4_NL:
      return NibbleDot<18, 2, LoadHalf, LevelIq4>;
    case DType::MXFP4:
      return NibbleDot<17, 1, ScaleMxfp4, LevelMxfp4>;
    case DType::Q2_K:
      return DotQ2_K;
    case DType::Q3_K:
      return DotQ3_K;
    case DType::Q4_K:
      return DotQ45_K<false>;
    case DType::Q5_K:
      return DotQ45_K<true>;
    case DType::Q6_K:
      return DotQ6_K;
    case DType::IQ4_XS:
      return DotIq4Xs;
    default:
      return PortableDotExtra(t);
  }
}

}  // namespace lockstep::quant::detail

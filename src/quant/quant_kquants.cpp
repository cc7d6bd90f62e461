// Dequantization of the 256-element K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

// Q2_K: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit quants, f16 d,
// f16 dmin. Each 32-byte group of quants holds four 2-bit planes, each plane two 16-blocks.
void DeqQ2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = LoadHalf(b + 80), dmin = LoadHalf(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// Unpacks the 16 six-bit Q3_K scales (stored as 8 low-nibble bytes + 4 bytes of 2-bit highs).
void UnpackQ3Scales(const uint8_t* s, int8_t* out) {
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    const int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    out[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// Q3_K: 32 bytes high-bit mask, 64 bytes low 2 bits, 12 bytes scales, f16 d. A clear high bit
// means the value is 4 lower.
void DeqQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  int8_t sc[16];
  UnpackQ3Scales(b + 96, sc);
  const float d = LoadHalf(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(sc[is++]);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scale/min pairs, 128 bytes of nibbles.
void DeqQ4_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 8; j += 2) {
    uint8_t s, m;
    ScaleMinK4(j, scales, &s, &m);
    const float d1 = d * static_cast<float>(s), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(j + 1, scales, &s, &m);
    const float d2 = d * static_cast<float>(s), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
  }
}

// Q5_K: as Q4_K plus 32 bytes of fifth bits (bit pair 2i, 2i+1 for sub-blocks 2i, 2i+1).
void DeqQ5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 8; j += 2) {
    uint8_t s, m;
    ScaleMinK4(j, scales, &s, &m);
    const float d1 = d * static_cast<float>(s), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(j + 1, scales, &s, &m);
    const float d2 = d * static_cast<float>(s), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, f16 d; q-32.
void DeqQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

BlockDequantFn KQuantDequant(DType t) {
  switch (t) {
    case DType::Q2_K:
      return DeqQ2_K;
    case DType::Q3_K:
      return DeqQ3_K;
    case DType::Q4_K:
      return DeqQ4_K;
    case DType::Q5_K:
      return DeqQ5_K;
    case DType::Q6_K:
      return DeqQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

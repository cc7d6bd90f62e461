// 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) and the ternary
// TQ1_0/TQ2_0: dequantization and the reference (GGUF-compatible) quantization.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "quant/iq_tables.h"
#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

// Q4_0: f16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high 16..31), q-8.
void DeqQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void DeqQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), m = LoadHalf(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0: f16 d, 32-bit mask of fifth bits, nibbles; q-16.
void DeqQ5_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint32_t qh = Load32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
    const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>(((qs[j] & 0xF) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

void DeqQ5_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), m = LoadHalf(b + 2);
  const uint32_t qh = Load32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
    const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>((qs[j] & 0xF) | h0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

void DeqQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void DeqIq4Nl(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(tables::kIq4nlValues[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(tables::kIq4nlValues[qs[j] >> 4]);
  }
}

void DeqMxfp4(const uint8_t* b, float* y) {
  const float d = E8M0Half(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(tables::kMxfp4Values[qs[j] & 0xF]) * d;
    y[j + 16] = static_cast<float>(tables::kMxfp4Values[qs[j] >> 4]) * d;
  }
}

// TQ1_0: 48 bytes of 5 trits (base-3 fixed point, most significant trit first), 4 bytes of
// 4 trits, f16 d. A trit is recovered as the top digit of byte*3^n times 3 over 256.
constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
inline float Trit(uint8_t byte, int n) {
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return static_cast<float>(static_cast<int>((static_cast<uint16_t>(q) * 3) >> 8) - 1);
}

void DeqTq1_0(const uint8_t* b, float* y) {
  const uint8_t* qs = b;
  const uint8_t* qh = b + 48;
  const float d = LoadHalf(b + 52);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) *y++ = Trit(qs[m], n) * d;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) *y++ = Trit(qs[32 + m], n) * d;
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) *y++ = Trit(qh[j], n) * d;
}

void DeqTq2_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b + 64);
  for (int j = 0; j < 64; j += 32)
    for (int l = 0; l < 4; ++l)
      for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(((b[j + m] >> (2 * l)) & 3) - 1) * d;
}

// ---- quantization (GGUF reference algorithms) ----

// Symmetric types: the scale maps the element of largest magnitude (keeping its sign) to the
// most negative level, so that level is used exactly.
void QuantQ4_0(const float* x, uint8_t* b) {
  float amax = 0, vmax = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      vmax = x[j];
    }
  const float d = vmax / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 8.5f)));
    b[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void MinMax(const float* x, float* lo, float* hi) {
  *lo = FLT_MAX;
  *hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < *lo) *lo = x[j];
    if (x[j] > *hi) *hi = x[j];
  }
}

void QuantQ4_1(const float* x, uint8_t* b) {
  float lo, hi;
  MinMax(x, &lo, &hi);
  const float d = (hi - lo) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  StoreHalf(b + 2, lo);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
    const int q1 =
        std::min(15, static_cast<int>(static_cast<int8_t>((x[16 + j] - lo) * id + 0.5f)));
    b[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void QuantQ5_0(const float* x, uint8_t* b) {
  float amax = 0, vmax = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      vmax = x[j];
    }
  const float d = vmax / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 16.5f)));
    b[6 + j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b + 2, &qh, 4);
}

void QuantQ5_1(const float* x, uint8_t* b) {
  float lo, hi;
  MinMax(x, &lo, &hi);
  const float d = (hi - lo) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  StoreHalf(b + 2, lo);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
    const int q1 = static_cast<uint8_t>((x[16 + j] - lo) * id + 0.5f);
    b[8 + j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b + 4, &qh, 4);
}

void QuantQ8_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

int NearestMxfp4(float x, float e) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(tables::kMxfp4Values[0]) * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(tables::kMxfp4Values[i]) * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// MXFP4: the shared exponent puts the largest magnitude in the top binade of E2M1 (max 6).
void QuantMxfp4(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const int e = amax > 0.0f ? static_cast<int>(std::floor(std::log2(amax)) - 2 + 127) : 0;
  const float d = E8M0Half(static_cast<uint8_t>(e));
  b[0] = static_cast<uint8_t>(e);
  for (int j = 0; j < 16; ++j)
    b[1 + j] = static_cast<uint8_t>(NearestMxfp4(x[j], d) | (NearestMxfp4(x[16 + j], d) << 4));
}

inline int TernaryDigit(float v, float id) {
  return static_cast<int>(std::lround(v * id)) + 1;
}

// Packs `count` trits (first most significant) as a base-3 fraction of 256, rounding up so the
// decoder's (byte*3^n*3)>>8 recovers each digit.
inline uint8_t PackTrits(const int* t, int count) {
  uint32_t q = 0;
  for (int i = 0; i < count; ++i) q = q * 3 + static_cast<uint32_t>(t[i]);
  for (int i = count; i < 5; ++i) q *= 3;
  q &= 0xFF;  // 3^5 = 243 fits a byte; the format stores q in uint8
  return static_cast<uint8_t>((q * 256 + 242) / 243);
}

void QuantTq1_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0 ? 1.0f / amax : 0.0f;
  int t[5];
  for (int m = 0; m < 32; ++m) {
    for (int n = 0; n < 5; ++n) t[n] = TernaryDigit(x[m + n * 32], id);
    b[m] = PackTrits(t, 5);
  }
  x += 160;
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 5; ++n) t[n] = TernaryDigit(x[m + n * 16], id);
    b[32 + m] = PackTrits(t, 5);
  }
  x += 80;
  for (int j = 0; j < 4; ++j) {
    for (int m = 0; m < 4; ++m) t[m] = TernaryDigit(x[j + m * 4], id);
    b[48 + j] = PackTrits(t, 4);
  }
  StoreHalf(b + 52, amax);
}

void QuantTq2_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0 ? 1.0f / amax : 0.0f;
  for (int j = 0; j < 64; j += 32) {
    for (int m = 0; m < 32; ++m) {
      int q = 0;
      for (int n = 0; n < 4; ++n) q |= (TernaryDigit(x[m + n * 32], id) & 3) << (2 * n);
      b[j + m] = static_cast<uint8_t>(q);
    }
    x += 128;
  }
  StoreHalf(b + 64, amax);
}

}  // namespace

BlockDequantFn LegacyDequant(DType t) {
  switch (t) {
    case DType::Q4_0:
      return DeqQ4_0;
    case DType::Q4_1:
      return DeqQ4_1;
    case DType::Q5_0:
      return DeqQ5_0;
    case DType::Q5_1:
      return DeqQ5_1;
    case DType::Q8_0:
      return DeqQ8_0;
    case DType::IQ4_NL:
      return DeqIq4Nl;
    case DType::MXFP4:
      return DeqMxfp4;
    case DType::TQ1_0:
      return DeqTq1_0;
    case DType::TQ2_0:
      return DeqTq2_0;
    default:
      return nullptr;
  }
}

BlockQuantFn LegacyQuant(DType t) {
  switch (t) {
    case DType::Q4_0:
      return QuantQ4_0;
    case DType::Q4_1:
      return QuantQ4_1;
    case DType::Q5_0:
      return QuantQ5_0;
    case DType::Q5_1:
      return QuantQ5_1;
    case DType::Q8_0:
      return QuantQ8_0;
    case DType::MXFP4:
      return QuantMxfp4;
    case DType::TQ1_0:
      return QuantTq1_0;
    case DType::TQ2_0:
      return QuantTq2_0;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

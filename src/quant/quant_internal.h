// Internal plumbing of the quant layer: unaligned loads and the per-block kernel tables.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"

namespace lockstep::quant::detail {

// GGUF rows are packed blocks with no alignment promise, so every multi-byte field is memcpy'd.
inline uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void Store16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, 2);
}
inline float LoadHalf(const uint8_t* p) {
  return HalfToFloat(Load16(p));
}
// AVX2 widening of n (a multiple of 8) F16 or BF16 elements (widen_avx2.cpp).
void WidenHalfRowAvx2(DType t, const void* src, float* dst, int64_t n);

inline void StoreHalf(uint8_t* p, float f) {
  Store16(p, FloatToHalf(f));
}

// E8M0 exponent byte to float, halved (MXFP4 values are stored doubled).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return BitsToFloat(bits);
}

// One block in, block_size floats out (and the reverse).
using BlockDequantFn = void (*)(const uint8_t* block, float* y);
using BlockQuantFn = void (*)(const float* x, uint8_t* block);

// Each family file answers for its own types; nullptr means "not mine".
BlockDequantFn LegacyDequant(DType t);
BlockDequantFn KQuantDequant(DType t);
BlockDequantFn IqDequant(DType t);
BlockQuantFn LegacyQuant(DType t);
BlockQuantFn KQuantQuant(DType t);

// K-quant 6-bit scale/min pair j (0..7) of the 12-byte packed scales of Q4_K / Q5_K.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace lockstep::quant::detail

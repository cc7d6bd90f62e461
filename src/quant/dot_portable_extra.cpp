// Portable integer dot kernels for Q4_1, Q5_0, Q5_1 against Q8x32 activations. These define
// the results; dot_extra_avx2.cpp must reproduce them bit for bit.
#include "quant/dot_extra.h"
#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

// Unsigned level (0..15 or 0..31) of element e of a 32-element nibble block with optional
// fifth-bit mask qh.
inline int NibbleLevel(const uint8_t* qs, int e) {
  return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4);
}
inline int FifthBit(uint32_t qh, int e) {
  return static_cast<int>((qh >> e) & 1) << 4;
}

float DotQ4_1(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * kQ4_1Bytes;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 4);
    int32_t isum = 0, xsum = 0;
    for (int e = 0; e < 32; ++e) {
      isum += NibbleLevel(wb + 4, e) * xq[e];
      xsum += xq[e];
    }
    acc.Add(b, CombineAddMin(LoadHalf(wb), LoadHalf(wb + 2), ExtraActScale(xb), isum, xsum));
  }
  return acc.Sum();
}

// Q5_0 levels are signed (q - 16), so no min term: isum = sum (q - 16) * xq.
float DotQ5_0(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * kQ5_0Bytes;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 4);
    const uint32_t qh = Load32(wb + 2);
    int32_t isum = 0;
    for (int e = 0; e < 32; ++e) isum += ((NibbleLevel(wb + 6, e) | FifthBit(qh, e)) - 16) * xq[e];
    acc.Add(b, Combine(LoadHalf(wb), ExtraActScale(xb), isum));
  }
  return acc.Sum();
}

float DotQ5_1(const uint8_t* w, const PreparedRow& x) {
  Acc8 acc;
  for (int64_t b = 0; b < x.n / 32; ++b) {
    const uint8_t* wb = w + b * kQ5_1Bytes;
    const uint8_t* xb = x.q.data() + b * kQ8x32Bytes;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 4);
    const uint32_t qh = Load32(wb + 4);
    int32_t isum = 0, xsum = 0;
    for (int e = 0; e < 32; ++e) {
      isum += (NibbleLevel(wb + 8, e) | FifthBit(qh, e)) * xq[e];
      xsum += xq[e];
    }
    acc.Add(b, CombineAddMin(LoadHalf(wb), LoadHalf(wb + 2), ExtraActScale(xb), isum, xsum));
  }
  return acc.Sum();
}

}  // namespace

ActFormat ActivationFormatExtra(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
      return ActFormat::kQ8x32;
    default:
      return ActFormat::kF32;
  }
}

RowDotFn PortableDotExtra(DType t) {
  switch (t) {
    case DType::Q4_1:
      return DotQ4_1;
    case DType::Q5_0:
      return DotQ5_0;
    case DType::Q5_1:
      return DotQ5_1;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

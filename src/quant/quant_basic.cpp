// Float formats (F32, F16, BF16) and the canonical f32 dot order shared by all paths.
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

namespace lockstep::quant {

float DotF32(const float* a, const float* b, int64_t n) {
  // Eight interleaved partial sums: the same order a 256-bit SIMD loop produces, so SIMD and
  // portable builds agree bit for bit.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  const float s0 = (acc[0] + acc[4]) + (acc[1] + acc[5]);
  const float s1 = (acc[2] + acc[6]) + (acc[3] + acc[7]);
  return s0 + s1;
}

namespace {

detail::BlockDequantFn FindDequant(DType t) {
  if (auto f = detail::LegacyDequant(t)) return f;
  if (auto f = detail::KQuantDequant(t)) return f;
  return detail::IqDequant(t);
}

detail::BlockQuantFn FindQuant(DType t) {
  if (auto f = detail::LegacyQuant(t)) return f;
  return detail::KQuantQuant(t);
}

bool IsFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

void WidenAt(Isa isa, DType t, const void* src, float* dst, int64_t n) {
  CHECKF(t == DType::F16 || t == DType::BF16, "WidenHalfRow: {} is not F16 or BF16", Name(t));
  int64_t i = 0;
  if (isa >= Isa::kAvx2) {
    i = n / 8 * 8;
    detail::WidenHalfRowAvx2(t, src, dst, i);
  }
  const auto* s = static_cast<const uint8_t*>(src);
  for (; i < n; ++i)
    dst[i] = t == DType::F16 ? detail::LoadHalf(s + 2 * i) : BF16ToFloat(detail::Load16(s + 2 * i));
}

}  // namespace

void WidenHalfRow(DType t, const void* src, float* dst, int64_t n) {
  WidenAt(CpuIsa(), t, src, dst, n);
}

void WidenHalfRowIsa(Isa isa, DType t, const void* src, float* dst, int64_t n) {
  CHECKF(CpuHasIsa(isa), "WidenHalfRow: this CPU lacks {}", IsaName(isa));
  WidenAt(isa, t, src, dst, n);
}

bool CanDequantize(DType t) {
  return IsFloat(t) || FindDequant(t) != nullptr;
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16:
    case DType::BF16:
      WidenHalfRow(t, src, dst, n);
      return;
    default:
      break;
  }
  const auto fn = FindDequant(t);
  CHECKF(fn != nullptr, "DequantizeRow: {} not supported", Name(t));
  const DTypeInfo& info = Info(t);
  CHECKF(n % info.block_size == 0, "DequantizeRow: {} elements is not a whole number of {} blocks",
         n, info.name);
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / info.block_size; ++b)
    fn(s + b * info.type_size, dst + b * info.block_size);
}

bool CanQuantize(DType t) {
  return IsFloat(t) || FindQuant(t) != nullptr;
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) detail::Store16(d + 2 * i, FloatToHalf(src[i]));
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) detail::Store16(d + 2 * i, FloatToBF16(src[i]));
      return;
    }
    default:
      break;
  }
  const auto fn = FindQuant(t);
  CHECKF(fn != nullptr, "QuantizeRow: {} not supported", Name(t));
  const DTypeInfo& info = Info(t);
  CHECKF(n % info.block_size == 0, "QuantizeRow: {} elements is not a whole number of {} blocks", n,
         info.name);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / info.block_size; ++b)
    fn(src + b * info.block_size, d + b * info.type_size);
}

}  // namespace lockstep::quant

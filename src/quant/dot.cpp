// PrepareRow / DotRow: activation preparation and the choice of dot kernel (AVX2 or portable).
#include <cmath>
#include <vector>

#include "core/check.h"
#include "quant/dot_internal.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

namespace lockstep::quant {
namespace {

// Q8 levels of a block: scale amax/127, round half away from zero. Computed once per row in
// portable code, so every kernel sees the same activation bytes.
void QuantizeQ8Block(const float* x, int n, float* d_out, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::lround(x[i] * id));
  *d_out = d;
}

void PrepareQ8x32(const float* x, int64_t n, std::vector<uint8_t>* out) {
  CHECKF(n % 32 == 0, "PrepareRow: {} elements is not a multiple of 32", n);
  out->resize(static_cast<size_t>(n / 32) * detail::kQ8x32Bytes);
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* blk = out->data() + b * detail::kQ8x32Bytes;
    float d;
    QuantizeQ8Block(x + b * 32, 32, &d, reinterpret_cast<int8_t*>(blk + 4));
    std::memcpy(blk, &d, 4);
  }
}

void PrepareQ8x256(const float* x, int64_t n, std::vector<uint8_t>* out) {
  CHECKF(n % 256 == 0, "PrepareRow: {} elements is not a multiple of 256", n);
  out->resize(static_cast<size_t>(n / 256) * detail::kQ8x256Bytes);
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out->data() + b * detail::kQ8x256Bytes;
    auto* q = reinterpret_cast<int8_t*>(blk + 4);
    float d;
    QuantizeQ8Block(x + b * 256, 256, &d, q);
    std::memcpy(blk, &d, 4);
    for (int g = 0; g < 16; ++g) {
      int16_t s = 0;
      for (int i = 0; i < 16; ++i) s = static_cast<int16_t>(s + q[16 * g + i]);
      std::memcpy(blk + 260 + 2 * g, &s, 2);
    }
  }
}

detail::RowDotFn ChooseDot(DType t) {
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    if (auto f = detail::Avx2Dot(t)) return f;
  return detail::PortableDot(t);
}

// Generic path: expand the weight row, then the canonical f32 dot.
float GenericDot(const void* w_row, const PreparedRow& x) {
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(x.n));
  DequantizeRow(x.wtype, w_row, w.data(), x.n);
  return DotF32(w.data(), x.f32.data(), x.n);
}

}  // namespace

void PrepareRow(DType wtype, const float* x, int64_t n, PreparedRow* out) {
  out->wtype = wtype;
  out->n = n;
  switch (detail::ActivationFormat(wtype)) {
    case detail::ActFormat::kQ8x32:
      out->f32.clear();
      PrepareQ8x32(x, n, &out->q);
      return;
    case detail::ActFormat::kQ8x256:
      out->f32.clear();
      PrepareQ8x256(x, n, &out->q);
      return;
    case detail::ActFormat::kF32:
      out->q.clear();
      out->f32.assign(x, x + n);
      return;
  }
}

float DotRow(const void* w_row, const PreparedRow& x) {
  // Chosen once per type; the table is immutable after its thread-safe initialization.
  static const auto table = [] {
    std::vector<detail::RowDotFn> fns(64, nullptr);
    for (uint32_t id = 0; id < fns.size(); ++id)
      if (auto info = LookupDType(id)) fns[id] = ChooseDot(info->type);
    return fns;
  }();
  const auto id = static_cast<uint32_t>(x.wtype);
  if (id < table.size() && table[id] != nullptr)
    return table[id](static_cast<const uint8_t*>(w_row), x);
  return GenericDot(w_row, x);
}

float DotRowPortable(const void* w_row, const PreparedRow& x) {
  if (auto f = detail::PortableDot(x.wtype)) return f(static_cast<const uint8_t*>(w_row), x);
  return GenericDot(w_row, x);
}

bool DotRowUsesAvx2(DType t) {
  return ChooseDot(t) != detail::PortableDot(t);
}

}  // namespace lockstep::quant

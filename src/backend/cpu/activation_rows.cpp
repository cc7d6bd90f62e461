// Activation rows (backend/cpu/activation_rows.h): the AVX-512 loops, then the AVX2 loops, where
// the CPU has them, and the scalar functions for the rest of a row and on other CPUs.
#include "backend/cpu/activation_rows.h"

#include <limits>

#include "backend/activations.h"
#include "core/check.h"

namespace lockstep::backend {
namespace {

// Elements [0, n) in the widest loops level `isa` has: `wide(at, len)` (AVX-512, multiples of
// 16), then `narrow(at, len)` (AVX2, multiples of 8), then `one(i)` for what is left.
template <class Wide, class Narrow, class One>
void ByLevel(quant::Isa isa, int64_t n, Wide wide, Narrow narrow, One one) {
  int64_t i = 0;
  if (isa >= quant::Isa::kAvx512) {
    i = n / 16 * 16;
    wide(0, i);
  }
  if (isa >= quant::Isa::kAvx2) {
    const int64_t end = i + (n - i) / 8 * 8;
    narrow(i, end - i);
    i = end;
  }
  for (; i < n; ++i) one(i);
}

void GeluMulRowAt(quant::Isa isa, const float* gate, const float* up, float* out, int64_t n) {
  ByLevel(
      isa, n,
      [&](int64_t at, int64_t len) { detail::GeluMulRowAvx512(gate + at, up + at, out + at, len); },
      [&](int64_t at, int64_t len) { detail::GeluMulRowAvx2(gate + at, up + at, out + at, len); },
      [&](int64_t i) { out[i] = GeluTanh(gate[i]) * up[i]; });
}

void SoftcapRowAt(quant::Isa isa, const float* x, float cap, float* out, int64_t n) {
  ByLevel(
      isa, n,
      [&](int64_t at, int64_t len) { detail::SoftcapRowAvx512(x + at, cap, out + at, len); },
      [&](int64_t at, int64_t len) { detail::SoftcapRowAvx2(x + at, cap, out + at, len); },
      [&](int64_t i) { out[i] = cap * Tanh(x[i] / cap); });
}

float SoftmaxRowAt(quant::Isa isa, float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  ByLevel(
      isa, n, [&](int64_t at, int64_t len) { mx = detail::MaxRowAvx512(x + at, len, mx); },
      [&](int64_t at, int64_t len) { mx = detail::MaxRowAvx2(x + at, len, mx); },
      [&](int64_t i) { mx = x[i] > mx ? x[i] : mx; });
  ByLevel(
      isa, n, [&](int64_t at, int64_t len) { detail::SoftmaxWeightsAvx512(x + at, mx, len); },
      [&](int64_t at, int64_t len) { detail::SoftmaxWeightsAvx2(x + at, mx, len); },
      [&](int64_t i) { x[i] = SoftmaxWeight(x[i] - mx); });
  float lanes[8] = {};
  int64_t i = 0;
  if (isa >= quant::Isa::kAvx2) {
    i = n / 8 * 8;
    detail::AddToLanes8Avx2(x, i, lanes);
  }
  for (; i < n; ++i) lanes[i % 8] += x[i];
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
         ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
}

}  // namespace

float SoftmaxRow(float* x, int64_t n) {
  return SoftmaxRowAt(quant::CpuIsa(), x, n);
}

float SoftmaxRowIsa(quant::Isa isa, float* x, int64_t n) {
  CHECKF(quant::CpuHasIsa(isa), "SoftmaxRow: this CPU lacks {}", quant::IsaName(isa));
  return SoftmaxRowAt(isa, x, n);
}

void GeluMulRow(const float* gate, const float* up, float* out, int64_t n) {
  GeluMulRowAt(quant::CpuIsa(), gate, up, out, n);
}

void SoftcapRow(const float* x, float cap, float* out, int64_t n) {
  SoftcapRowAt(quant::CpuIsa(), x, cap, out, n);
}

void GeluMulRowIsa(quant::Isa isa, const float* gate, const float* up, float* out, int64_t n) {
  CHECKF(quant::CpuHasIsa(isa), "GeluMulRow: this CPU lacks {}", quant::IsaName(isa));
  GeluMulRowAt(isa, gate, up, out, n);
}

void SoftcapRowIsa(quant::Isa isa, const float* x, float cap, float* out, int64_t n) {
  CHECKF(quant::CpuHasIsa(isa), "SoftcapRow: this CPU lacks {}", quant::IsaName(isa));
  SoftcapRowAt(isa, x, cap, out, n);
}

}  // namespace lockstep::backend

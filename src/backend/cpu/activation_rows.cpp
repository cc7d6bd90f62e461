// Activation rows (backend/cpu/activation_rows.h): the AVX-512 loops, then the AVX2 loops, where
// the CPU has them, and the scalar functions for the rest of a row and on other CPUs.
#include "backend/cpu/activation_rows.h"

#include "backend/activations.h"

namespace lockstep::backend {

void GeluMulRowIsa(quant::Isa isa, const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  if (isa >= quant::Isa::kAvx512) {
    i = n / 8 * 8;
    detail::GeluMulRowAvx512(gate, up, out, i);
  }
  if (isa >= quant::Isa::kAvx2) {
    const int64_t end = i + (n - i) / 4 * 4;
    detail::GeluMulRowAvx2(gate + i, up + i, out + i, end - i);
    i = end;
  }
  for (; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

void SoftcapRowIsa(quant::Isa isa, const float* x, float cap, float* out, int64_t n) {
  int64_t i = 0;
  if (isa >= quant::Isa::kAvx512) {
    i = n / 8 * 8;
    detail::SoftcapRowAvx512(x, cap, out, i);
  }
  if (isa >= quant::Isa::kAvx2) {
    const int64_t end = i + (n - i) / 4 * 4;
    detail::SoftcapRowAvx2(x + i, cap, out + i, end - i);
    i = end;
  }
  for (; i < n; ++i) out[i] = cap * Tanh(x[i] / cap);
}

void GeluMulRow(const float* gate, const float* up, float* out, int64_t n) {
  GeluMulRowIsa(quant::CpuIsa(), gate, up, out, n);
}

void SoftcapRow(const float* x, float cap, float* out, int64_t n) {
  SoftcapRowIsa(quant::CpuIsa(), x, cap, out, n);
}

}  // namespace lockstep::backend

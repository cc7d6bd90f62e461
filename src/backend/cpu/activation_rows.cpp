// Activation rows (backend/cpu/activation_rows.h): the AVX2 loops where the CPU has them, the
// scalar functions for the rest of a row and on other CPUs.
#include "backend/cpu/activation_rows.h"

#include "backend/activations.h"
#include "quant/quant.h"

namespace lockstep::backend {

void GeluMulRow(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  if (quant::CpuIsa() >= quant::Isa::kAvx2) {
    i = n / 4 * 4;
    detail::GeluMulRowAvx2(gate, up, out, i);
  }
  for (; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

void SoftcapRow(const float* x, float cap, float* out, int64_t n) {
  int64_t i = 0;
  if (quant::CpuIsa() >= quant::Isa::kAvx2) {
    i = n / 4 * 4;
    detail::SoftcapRowAvx2(x, cap, out, i);
  }
  for (; i < n; ++i) out[i] = cap * Tanh(x[i] / cap);
}

}  // namespace lockstep::backend

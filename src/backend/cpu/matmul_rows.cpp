// Run-time choice of the multi-row float dot kernels.
#include "backend/cpu/matmul_rows.h"

#include "core/check.h"

namespace lockstep::backend {

void DotRows4Avx2(DType t, const void* w_row, const float* const* x, int n_rows, int64_t n,
                  float* out);

namespace {
bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
}  // namespace

bool HasDotRows4(DType t) {
  return (t == DType::F32 || t == DType::F16) && CpuHasAvx2();
}

void DotRows4(DType t, const void* w_row, const float* const* x, int n_rows, int64_t n,
              float* out) {
  CHECK(HasDotRows4(t) && n_rows >= 1 && n_rows <= 4);
  DotRows4Avx2(t, w_row, x, n_rows, n, out);
}

}  // namespace lockstep::backend

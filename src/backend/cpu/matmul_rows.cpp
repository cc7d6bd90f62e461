// Run-time choice of the blocked multi-row float matmul.
#include "backend/cpu/matmul_rows.h"

#include "core/check.h"

namespace lockstep::backend {

void MatMulRowsBlockAvx2(const RowsBlock& b, float* scratch);
void MatMulRowsBlockAvx512(const RowsBlock& b, float* scratch);

namespace {
bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// Every extension matmul_rows_avx512.cpp is compiled with (the compiler may use any of them).
bool CpuHasAvx512() {
  static const bool has =
      CpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni");
  return has;
}
}  // namespace

bool HasRowsKernel(DType t) {
  return (t == DType::F32 || t == DType::F16 || t == DType::BF16) && CpuHasAvx2();
}

bool HasRowsIsa(RowsIsa isa) {
  return isa == RowsIsa::kAvx2 ? CpuHasAvx2() : CpuHasAvx512();
}

void MatMulRowsBlockWith(RowsIsa isa, const RowsBlock& b, float* scratch) {
  CHECK(HasRowsKernel(b.type) && HasRowsIsa(isa) && b.n_cols >= 1 && b.n_cols <= kRowsMaxCols &&
        b.n_rows >= 1);
  if (isa == RowsIsa::kAvx512) return MatMulRowsBlockAvx512(b, scratch);
  MatMulRowsBlockAvx2(b, scratch);
}

void MatMulRowsBlock(const RowsBlock& b, float* scratch) {
  // Both kernels give the same bits (matmul_rows.h); AVX-512 issues half the instructions.
  MatMulRowsBlockWith(CpuHasAvx512() ? RowsIsa::kAvx512 : RowsIsa::kAvx2, b, scratch);
}

}  // namespace lockstep::backend

// Run-time choice of the blocked multi-row float matmul.
#include "backend/cpu/matmul_rows.h"

#include "core/check.h"
#include "quant/quant.h"

namespace lockstep::backend {

void MatMulRowsBlockAvx2(const RowsBlock& b, float* scratch);
void MatMulRowsBlockAvx512(const RowsBlock& b, float* scratch);

namespace {
// The kernels' extensions are quant's levels (avx2: AVX2+FMA+F16C; avx512: F/BW/VL/DQ/VNNI, every
// extension matmul_rows_avx512.cpp is compiled with), capped the same way by LOCKSTEP_ISA.
bool CpuHasAvx2() { return quant::CpuHasIsa(quant::Isa::kAvx2); }
bool CpuHasAvx512() { return quant::CpuHasIsa(quant::Isa::kAvx512); }
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

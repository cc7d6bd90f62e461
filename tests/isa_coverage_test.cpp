// Instruction-set levels this CPU cannot run show as skipped tests (one per level), so a run on a
// machine without AVX-512 says its AVX-512 kernels went untested instead of passing silently.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/matmul_rows.h"
#include "quant/quant.h"

namespace lockstep {
namespace {

using quant::Isa;

class IsaCoverage : public ::testing::TestWithParam<Isa> {};

// The per-level loops of QuantDot.EveryIsaMatchesPortableBitForBitAndIsAccurate, QuantTileIsa,
// QuantPackedIsa and MatMulRows.* run a level only where the CPU has it; this names the levels
// they skipped.
TEST_P(IsaCoverage, LevelIsTestedOnThisCpu) {
  const Isa isa = GetParam();
  const bool rows = isa == Isa::kAvx2 ? backend::HasRowsIsa(backend::RowsIsa::kAvx2)
                                      : backend::HasRowsIsa(backend::RowsIsa::kAvx512);
  if (!quant::CpuHasIsa(isa))
    GTEST_SKIP()
        << "this CPU lacks " << quant::IsaName(isa)
        << " (or LOCKSTEP_ISA caps the level below it): its dot, tile, packed and multi-row "
           "kernels are untested in this run";
  EXPECT_TRUE(rows) << "the quant level is present but the multi-row kernel's check disagrees";
}

INSTANTIATE_TEST_SUITE_P(Levels, IsaCoverage, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& level) {
                           return std::string(quant::IsaName(level.param));
                         });

}  // namespace
}  // namespace lockstep

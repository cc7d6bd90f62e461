// WidenHalfRow at every instruction-set level equals core/half.h's HalfToFloat / BF16ToFloat bit
// for bit on all 65,536 inputs of each type (subnormals, infinities, quiet and signalling NaNs);
// the hardware F16 conversion alone, which quiets signalling NaNs, differs (negative control).
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"

namespace lockstep::quant {
namespace {

// Every 16-bit pattern once, plus three so a row ends in a tail the vector loop leaves over.
std::vector<uint16_t> AllPatterns() {
  std::vector<uint16_t> v(65536 + 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

TEST(WidenHalf, EveryLevelEqualsTheScalarConversionOnEveryInput) {
  const std::vector<uint16_t> in = AllPatterns();
  const auto n = static_cast<int64_t>(in.size());
  for (DType t : {DType::F16, DType::BF16}) {
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
      if (!CpuHasIsa(isa)) continue;
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + std::string(Name(t)));
      std::vector<float> out(in.size());
      WidenHalfRowIsa(isa, t, in.data(), out.data(), n);
      int differ = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const float want = t == DType::F16 ? HalfToFloat(in[i]) : BF16ToFloat(in[i]);
        differ += std::memcmp(&want, &out[i], sizeof want) != 0;
      }
      EXPECT_EQ(differ, 0);
    }
  }
}

// Negative control: the plain F16C conversion gives other bits for the 1,022 signalling NaNs,
// so the comparison above sees NaN payloads.
__attribute__((target("avx2,f16c"))) int PlainF16cDifferences(const std::vector<uint16_t>& in) {
  int differ = 0;
  for (size_t i = 0; i + 8 <= in.size(); i += 8) {
    float out[8];
    _mm256_storeu_ps(out,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&in[i]))));
    for (int j = 0; j < 8; ++j) {
      const float want = HalfToFloat(in[i + j]);
      differ += std::memcmp(&want, &out[j], sizeof want) != 0;
    }
  }
  return differ;
}

TEST(WidenHalf, NegativeControlPlainHardwareConversionQuietsSignallingNans) {
  if (!CpuHasIsa(Isa::kAvx2)) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  EXPECT_EQ(PlainF16cDifferences(AllPatterns()), 1022);
}

}  // namespace
}  // namespace lockstep::quant

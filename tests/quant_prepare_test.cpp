// PrepareRow at every instruction-set level gives the portable code's bytes (Q8 blocks of 32 and
// of 256 with their 16-element sums), on Gaussian rows, exact half-way levels, zero blocks and
// non-finite values; a quantizer that rounds half-way levels to even differs on the same rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

constexpr int64_t kN = 4096;  // a multiple of both block lengths

// Rows that reach every branch of the level rounding: Gaussian values at several magnitudes,
// a block whose largest value is 127 (reciprocal scale 1, so x.5 values are exact ties), an
// all-zero block, and blocks holding an infinity, a NaN, subnormals and huge values.
std::vector<std::vector<float>> Rows() {
  std::vector<std::vector<float>> rows;
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    auto r = testing::GaussianRow(kN, static_cast<uint32_t>(scale * 7 + 3));
    for (float& v : r) v *= scale;
    rows.push_back(r);
  }
  std::vector<float> ties(kN, 0.0f);
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t j = i % 256;
    ties[i] = j == 0 ? 127.0f : static_cast<float>(j % 63) - 31.0f + (j % 2 ? 0.5f : -0.5f);
  }
  for (int64_t i = 512; i < 768; ++i) ties[i] = 0.0f;  // a zero block of either length
  rows.push_back(ties);
  auto odd = testing::GaussianRow(kN, 99);
  odd[40] = std::numeric_limits<float>::infinity();
  odd[300] = std::numeric_limits<float>::quiet_NaN();
  odd[600] = -std::numeric_limits<float>::infinity();
  odd[601] = std::numeric_limits<float>::quiet_NaN();
  odd[1000] = 1e-40f;
  odd[1300] = 3e38f;
  odd[1301] = -3e38f;
  rows.push_back(odd);
  return rows;
}

// One weight type per activation layout: Q8_0 (blocks of 32), Q4_K (256 with sums).
constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_K};

TEST(QuantPrepare, EveryIsaGivesThePortableBytes) {
  const auto rows = Rows();
  for (DType t : kTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      PreparedRow portable;
      PrepareRowIsa(Isa::kPortable, t, rows[r].data(), kN, &portable);
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (!CpuHasIsa(isa)) continue;
        SCOPED_TRACE(std::string(IsaName(isa)) + " " + std::string(Name(t)) + " row " +
                     std::to_string(r));
        PreparedRow got;
        PrepareRowIsa(isa, t, rows[r].data(), kN, &got);
        ASSERT_EQ(got.q.size(), portable.q.size());
        EXPECT_EQ(std::memcmp(got.q.data(), portable.q.data(), got.q.size()), 0);
      }
    }
  }
}

// Negative control: the levels of the ties row rounded half to even (std::nearbyint) differ
// from the prepared bytes, so the rows above do tell the rounding rules apart.
TEST(QuantPrepare, HalfToEvenLevelsDiffer) {
  const std::vector<float> ties = Rows()[3];
  PreparedRow p;
  PrepareRow(DType::Q8_0, ties.data(), kN, &p);
  int differ = 0;
  for (int64_t b = 0; b < kN / 32; ++b) {
    float d;
    std::memcpy(&d, p.q.data() + b * 36, 4);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const auto even = static_cast<int8_t>(std::nearbyint(ties[b * 32 + i] * id));
      differ += even != static_cast<int8_t>(p.q[b * 36 + 4 + i]);
    }
  }
  EXPECT_GT(differ, 0);
}

}  // namespace
}  // namespace lockstep::quant

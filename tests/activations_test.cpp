// The backends' own tanh/GELU: accurate against double-precision tanh, odd, saturating,
// and a pure function of its input (the negative control shows the accuracy check can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/activation_rows.h"
#include "quant/quant.h"

namespace lockstep::backend {
namespace {

// Largest error of f against double tanh, in units in the last place of the float nearest the
// true value, over every 97th float in [0, 10] (tiny inputs included) and their negatives.
template <typename F>
double MaxUlpError(F&& f) {
  double worst = 0;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(10.0f); bits += 97) {
    for (float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)}) {
      const double ref = std::tanh(static_cast<double>(x));
      const float near = std::fabs(static_cast<float>(ref));
      const double ulp = static_cast<double>(std::nextafter(near, 2.0f)) - near;
      worst = std::max(worst, std::fabs(static_cast<double>(f(x)) - ref) / ulp);
    }
  }
  return worst;
}

TEST(Activations, TanhIsAccurateOddAndSaturates) {
  const double err = MaxUlpError([](float x) { return Tanh(x); });
  std::printf("  max |Tanh - tanh| over [-10, 10]: %.3f ulp\n", err);
  EXPECT_LT(err, 3.0);  // float arithmetic without cancellation (measured: 2.4)
  int differ = 0;
  for (int i = -100000; i <= 100000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    differ += Tanh(x) != std::tanh(x);
  }
  std::printf("  differs from libm tanhf on %d of 200001 inputs in [-10, 10]\n", differ);
  for (float x : {1e-30f, 1e-7f, 0.01f, 0.124f, 0.126f, 0.5f, 3.0f, 8.9f}) {
    EXPECT_EQ(Tanh(-x), -Tanh(x)) << x;
    // Near zero the relative error matters too (softcap of small logits).
    EXPECT_NEAR(Tanh(x) / std::tanh(static_cast<double>(x)), 1.0, 2e-6) << x;
  }
  EXPECT_EQ(Tanh(0.0f), 0.0f);
  EXPECT_EQ(Tanh(50.0f), 1.0f);
  EXPECT_EQ(Tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isfinite(Tanh(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Activations, GeluMatchesItsDefinition) {
  double worst = 0;
  for (int i = -20000; i <= 20000; ++i) {
    const double x = i / 2000.0;
    const double ref = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    worst =
        std::max(worst, std::fabs(GeluTanh(static_cast<float>(x)) - ref) / (1 + std::fabs(ref)));
  }
  EXPECT_LT(worst, 1e-6);
}

// Negative control: the textbook float formula 1 - 2 / (exp(2x) + 1) (libm expf) cancels near
// zero and fails the same bound, so the bound does tell a careful tanh from a plausible one.
TEST(Activations, NegativeControlFloatFormulaFails) {
  const double err = MaxUlpError([](float x) { return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f); });
  EXPECT_GT(err, 3.0);
}

// Inputs for the row kernels: a dense sweep of [-12, 12], tiny and huge magnitudes, signed
// zeros, infinities and a NaN.
std::vector<float> RowInputs() {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {1e-38f, 1e-30f, 1e-7f, 0.125f, 0.12499999f, 9.999999f, 10.0f, 88.0f, 3e38f})
    x.insert(x.end(), {v, -v});
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()});
  while (x.size() % 16 != 15) x.push_back(0.5f);  // tails for the AVX2 and scalar loops
  return x;
}

bool SameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The rows at every level the CPU runs equal GeluTanh(g) * u and cap * Tanh(x / cap) bit for
// bit, on the sweep and on the same values shuffled; a GELU with its cubic term fused (std::fma)
// differs somewhere (negative control).
void CheckRows(quant::Isa isa, const std::vector<float>& x) {
  std::vector<float> up(x.size()), out(x.size()), capped(x.size());
  for (size_t i = 0; i < x.size(); ++i) up[i] = 1.0f + static_cast<float>(i % 7) * 0.25f;
  const int64_t n = static_cast<int64_t>(x.size());
  GeluMulRowIsa(isa, x.data(), up.data(), out.data(), n);
  SoftcapRowIsa(isa, x.data(), 30.0f, capped.data(), n);
  int fused_differs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(SameBits(out[i], GeluTanh(x[i]) * up[i])) << "gelu x=" << x[i];
    ASSERT_TRUE(SameBits(capped[i], 30.0f * Tanh(x[i] / 30.0f))) << "softcap x=" << x[i];
    const float k = 0.7978845608028654f;
    const float fused =
        0.5f * x[i] * (1.0f + Tanh(k * std::fma(0.044715f * x[i] * x[i], x[i], x[i]))) * up[i];
    fused_differs += !SameBits(fused, out[i]) && !std::isnan(out[i]);
  }
  EXPECT_GT(fused_differs, 0);
}

TEST(ActivationRows, EqualTheScalarFunctionsBitForBit) {
  std::vector<float> x = RowInputs();
  std::vector<float> shuffled = x;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  for (quant::Isa isa : {quant::Isa::kPortable, quant::Isa::kAvx2, quant::Isa::kAvx512}) {
    if (!quant::CpuHasIsa(isa)) continue;
    SCOPED_TRACE(std::string(quant::IsaName(isa)));
    CheckRows(isa, x);
    CheckRows(isa, shuffled);
  }
}

}  // namespace
}  // namespace lockstep::backend

// The CPU backend's own tanh/GELU: accurate against double-precision tanh, odd, saturating,
// and a pure function of its input (the negative control shows the accuracy check can fail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/activations.h"

namespace lockstep::backend {
namespace {

// Largest |Tanh(x) - tanh(x)| over a dense grid of [-lim, lim].
template <typename F>
double MaxAbsError(F&& f, double lim) {
  double worst = 0;
  for (int i = -400000; i <= 400000; ++i) {
    const float x = static_cast<float>(lim * i / 400000.0);
    worst =
        std::max(worst, std::fabs(static_cast<double>(f(x)) - std::tanh(static_cast<double>(x))));
  }
  return worst;
}

TEST(Activations, TanhIsAccurateOddAndSaturates) {
  const double err = MaxAbsError([](float x) { return Tanh(x); }, 12.0);
  std::printf("  max |Tanh - tanh| over [-12, 12]: %.3g\n", err);
  EXPECT_LT(err, 3.1e-8);  // half an ulp of values in [0.5, 1), plus nothing measurable
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

// Negative control: a tanh computed in float (1 - 2 / (exp(2x) + 1), libm expf) fails the
// same bound, so the bound does tell a careful tanh from a plausible one.
TEST(Activations, NegativeControlFloatFormulaFails) {
  const double err =
      MaxAbsError([](float x) { return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f); }, 2.0);
  EXPECT_GT(err, 3.1e-8);
}

}  // namespace
}  // namespace lockstep::backend

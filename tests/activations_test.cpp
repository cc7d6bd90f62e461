// The CPU backend's own tanh/GELU: accurate against double-precision tanh, odd, saturating,
// and a pure function of its input (the negative control shows the accuracy check can fail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/activations.h"

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
  EXPECT_LT(err, 1.2e-7);
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

// Negative control: a visibly worse tanh (Taylor to x^3 only) fails the same bound.
TEST(Activations, NegativeControlCoarseTanhFails) {
  const double err = MaxAbsError([](float x) { return x - x * x * x / 3.0f; }, 0.5);
  EXPECT_GT(err, 1.2e-7);
}

}  // namespace
}  // namespace lockstep::backend

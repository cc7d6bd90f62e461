// The backends' own tanh/GELU and softmax weights: accurate against double-precision tanh and
// exp, odd or clamped as documented, a pure function of the input, and the same bits at every
// ISA level (the negative controls show the accuracy checks can fail).
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

// |got - ref| in units in the last place of the float nearest ref (the spacing above its
// magnitude).
double UlpError(float got, double ref) {
  const float near = std::fabs(static_cast<float>(ref));
  const double ulp =
      static_cast<double>(std::nextafter(near, std::numeric_limits<float>::infinity())) - near;
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

// Largest error of f against double tanh, in ulp, over every 97th float in [0, 10] (tiny inputs
// included) and their negatives.
template <typename F>
double MaxUlpError(F&& f) {
  double worst = 0;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(10.0f); bits += 97) {
    for (float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)})
      worst = std::max(worst, UlpError(f(x), std::tanh(static_cast<double>(x))));
  }
  return worst;
}

// Largest error of f against double exp, in ulp, over every 97th float in [-80, 0] (the softmax
// weights' domain above the clamp; tiny magnitudes and -0 included).
template <typename F>
double MaxExpUlpError(F&& f) {
  double worst = 0;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(80.0f); bits += 97) {
    const float x = -std::bit_cast<float>(bits);
    worst = std::max(worst, UlpError(f(x), std::exp(static_cast<double>(x))));
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

// SoftmaxWeight is within 2 ulp of e^x on [-80, 0], exactly 1 at 0 (the row's largest score), 0
// below the clamp, and the clamp's value for a NaN (what every vector level gives).
TEST(ActivationRows, SoftmaxWeightWithinTwoUlpOfExp) {
  const double err = MaxExpUlpError([](float x) { return SoftmaxWeight(x); });
  std::printf("  max |SoftmaxWeight - exp| over [-80, 0]: %.3f ulp\n", err);
  EXPECT_LE(err, 2.0);
  EXPECT_EQ(SoftmaxWeight(0.0f), 1.0f);
  EXPECT_EQ(SoftmaxWeight(-0.0f), 1.0f);
  EXPECT_GT(SoftmaxWeight(-80.0f), 0.0f);  // the clamp itself is kept
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {std::nextafter(-80.0f, -inf), -80.5f, -81.0f, -1000.0f, -3e38f, -inf})
    EXPECT_TRUE(SameBits(SoftmaxWeight(x), 0.0f)) << x;
  EXPECT_TRUE(
      SameBits(SoftmaxWeight(std::numeric_limits<float>::quiet_NaN()), SoftmaxWeight(-80.0f)));
}

// SoftmaxWeight's method with one step weakened: the polynomial cut after its r^3 term, or the
// Cody-Waite reduction with ln2 in one float (its error grows with |k|).
template <bool kTruncated, bool kOneConstant>
float WeakSoftmaxWeight(float x) {
  using namespace activation;
  const float a = x > kMinLogWeight ? x : kMinLogWeight;
  const int k = static_cast<int>(a * kLog2E - 0.5f);
  const float kf = static_cast<float>(k);
  const float r = kOneConstant ? a - kf * 0.6931472f : (a - kf * kLn2Hi) - kf * kLn2Lo;
  const float e = kTruncated ? 1.0f + (r + (r * r) * (kP2 + r * kP3)) : 1.0f + Expm1Reduced(r);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  return x < kMinLogWeight ? 0.0f : scale * e;
}

// Negative control: both weakened exps fail the 2 ulp bound somewhere, so the bound does tell the
// careful exp from a plausible one.
TEST(ActivationRows, NegativeControlWeakerExpFails) {
  const double truncated = MaxExpUlpError(WeakSoftmaxWeight<true, false>);
  const double one_constant = MaxExpUlpError(WeakSoftmaxWeight<false, true>);
  std::printf("  cut after r^3: %.3f ulp; ln2 in one float: %.3f ulp\n", truncated, one_constant);
  EXPECT_GT(truncated, 2.0);
  EXPECT_GT(one_constant, 2.0);
}

// Rows of scores for SoftmaxRow: lengths 1..70 (every tail length of the 16- and 8-lane loops)
// and 127, 128, 129, 513, drawn from [-120, 40] so that some weights fall below the clamp, with
// ties of the maximum, exact zeros, a -0, a -inf, and one row holding NaNs in the vector part,
// the tail and the first element (where the running maximum starts).
std::vector<std::vector<float>> SoftmaxInputs() {
  std::mt19937 gen(20240611);
  std::uniform_real_distribution<float> score(-120.0f, 40.0f);
  std::vector<int> lengths;
  for (int n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.insert(lengths.end(), {127, 128, 129, 513});
  std::vector<std::vector<float>> rows;
  for (int n : lengths) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = score(gen);
    if (n >= 3 && n % 3 == 0) {  // the maximum twice or three times
      const float mx = *std::max_element(x.begin(), x.end());
      x[static_cast<size_t>(gen() % n)] = mx;
      x[static_cast<size_t>(gen() % n)] = mx;
    }
    if (n % 5 == 0) x[static_cast<size_t>(gen() % n)] = 0.0f;
    if (n % 7 == 0) x[static_cast<size_t>(gen() % n)] = -0.0f;
    if (n % 11 == 0) x[static_cast<size_t>(gen() % n)] = -std::numeric_limits<float>::infinity();
    rows.push_back(std::move(x));
  }
  rows.push_back({0.0f, -0.0f});  // the maximum is a signed zero
  std::vector<float> nan_row(129);
  for (float& v : nan_row) v = score(gen);
  for (size_t i : {0u, 20u, 128u}) nan_row[i] = std::numeric_limits<float>::quiet_NaN();
  rows.push_back(std::move(nan_row));
  return rows;
}

// Every level's SoftmaxRow gives the portable level's weights and sum bit for bit; the portable
// level's weights are SoftmaxWeight(x - max) (NaNs skipped by the max) and its sum is the
// documented 8-lane order, recomputed here lane by lane. A plain left-to-right sum differs from
// it on some row (negative control: the sum check can tell the orders apart).
TEST(ActivationRows, SoftmaxRowLevelsGiveThePortableBits) {
  int sequential_differs = 0;
  for (const std::vector<float>& x : SoftmaxInputs()) {
    const int64_t n = static_cast<int64_t>(x.size());
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> portable = x;
    const float portable_sum = SoftmaxRowIsa(quant::Isa::kPortable, portable.data(), n);

    float mx = -std::numeric_limits<float>::infinity();
    for (float v : x) mx = v > mx ? v : mx;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(SameBits(portable[i], SoftmaxWeight(x[i] - mx))) << "i=" << i << " x=" << x[i];
    float lanes[8] = {};
    for (int64_t l = 0; l < 8; ++l)
      for (int64_t i = l; i < n; i += 8) lanes[l] += portable[i];
    const float expected = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                           ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    EXPECT_TRUE(SameBits(portable_sum, expected)) << portable_sum << " vs " << expected;
    float sequential = 0.0f;
    for (float w : portable) sequential += w;
    sequential_differs += !SameBits(sequential, expected);

    for (quant::Isa isa : {quant::Isa::kAvx2, quant::Isa::kAvx512}) {
      if (!quant::CpuHasIsa(isa)) continue;
      SCOPED_TRACE(std::string(quant::IsaName(isa)));
      std::vector<float> w = x;
      const float sum = SoftmaxRowIsa(isa, w.data(), n);
      if (std::memcmp(w.data(), portable.data(), x.size() * sizeof(float)) != 0) {
        for (int64_t i = 0; i < n; ++i)  // name the first differing weight
          ASSERT_TRUE(SameBits(w[i], portable[i])) << "i=" << i << " x=" << x[i] << " max=" << mx
                                                   << ": " << w[i] << " vs " << portable[i];
      }
      EXPECT_TRUE(SameBits(sum, portable_sum)) << sum << " vs " << portable_sum;
    }
  }
  EXPECT_GT(sequential_differs, 0);
}

}  // namespace
}  // namespace lockstep::backend

// Greedy selection is the first index of the maximum, whatever the row's length and ties.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sample/sampler.h"

namespace lockstep {
namespace {

// The definition: a left-to-right scan keeping the earlier index on ties.
int32_t ScanArgmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  return best;
}

TEST(SampleArgmax, FirstIndexOfTheMaximumOnTiedRows) {
  int ties_not_first = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + static_cast<size_t>(trial * 37 % 1000);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i)  // few distinct values: many ties, signed zeros included
      v[i] = static_cast<float>(static_cast<int>(sample::UniformAt(trial, 0, i) * 7) - 3) *
             (sample::UniformAt(trial, 1, i) < 0.5 ? 1.0f : -1.0f) * 0.5f;
    const int32_t got = sample::Argmax(v);
    ASSERT_EQ(got, ScanArgmax(v)) << "trial " << trial << " n " << n;
    // Negative control: the last index of the maximum differs on most tied rows.
    int32_t last = got;
    for (size_t i = 0; i < n; ++i)
      if (v[i] == v[got]) last = static_cast<int32_t>(i);
    ties_not_first += last != got;
  }
  EXPECT_GT(ties_not_first, 300);
  EXPECT_EQ(sample::Argmax(std::vector<float>{-0.0f, 0.0f}), 0);
  EXPECT_EQ(sample::Argmax(std::vector<float>{NAN, 1.0f}), 0);  // as the scan: NaN never beaten
  EXPECT_EQ(sample::Argmax(std::vector<float>{1.0f, NAN, 2.0f}), 2);
}

}  // namespace
}  // namespace lockstep

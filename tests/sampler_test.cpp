// Greedy selection is the first index of the maximum, whatever the row's length and ties; the
// sampling filters (top-k, min-p, top-p) and the repeat penalty follow their definitions and keep
// a selection a pure function of (settings, seed, position, history, logits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
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

std::vector<float> RandomRow(int trial, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(sample::UniformAt(trial, 7, static_cast<int64_t>(i)) * 8.0 - 4.0);
  return v;
}

// The candidate set written out from the definitions, over a full rank-ordered sort.
std::set<int32_t> ReferenceCandidates(const sample::Settings& s, const std::vector<float>& v) {
  std::vector<int32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return sample::RanksBefore(v.data(), a, b); });
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < order.size())
    order.resize(static_cast<size_t>(s.top_k));
  const double t = s.temperature, best = v[static_cast<size_t>(order[0])];
  std::vector<int32_t> kept;
  for (int32_t i : order)  // min-p: probability >= min_p x the best's, i.e. a logit threshold
    if (std::exp((v[static_cast<size_t>(i)] - best) / t) >= s.min_p - 1e-12) kept.push_back(i);
  std::vector<int32_t> by_id = kept;
  std::sort(by_id.begin(), by_id.end());
  double total = 0;
  for (int32_t i : by_id) total += std::exp((v[static_cast<size_t>(i)] - best) / t);
  std::set<int32_t> out;
  double mass = 0;
  for (int32_t i : kept) {
    if (s.top_p < 1.0f && mass >= s.top_p * total) break;
    out.insert(i);
    mass += std::exp((v[static_cast<size_t>(i)] - best) / t);
  }
  return out;
}

TEST(SampleFilters, SelectionsStayInsideTheDefinedCandidates) {
  int outside_without_filters = 0, trials = 0;
  std::vector<int32_t> scratch = {5, 9, 1};  // a dirty scratch must not matter
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<float> v = RandomRow(trial, 50 + static_cast<size_t>(trial % 200));
    sample::Settings s;
    s.temperature = 0.5f + static_cast<float>(trial % 5) * 0.3f;
    s.seed = static_cast<uint64_t>(trial);
    s.top_k = trial % 3 == 0 ? 20 : 0;
    s.top_p = trial % 2 ? 0.7f : 1.0f;
    s.min_p = trial % 4 == 1 ? 0.2f : 0.0f;
    if (s.top_k == 0 && s.top_p == 1.0f && s.min_p == 0.0f) continue;
    const std::set<int32_t> allowed = ReferenceCandidates(s, v);
    for (int64_t pos = 0; pos < 8; ++pos) {
      const int32_t got = sample::Select(s, pos, v, {}, &scratch);
      ASSERT_TRUE(allowed.count(got)) << "trial " << trial << " pos " << pos << " chose " << got;
      ASSERT_EQ(got, sample::Select(s, pos, v));  // the same with a fresh scratch
      // Negative control: the same noise without the filters often leaves the set.
      sample::Settings plain = s;
      plain.top_k = 0, plain.top_p = 1.0f, plain.min_p = 0.0f;
      outside_without_filters += !allowed.count(sample::Select(plain, pos, v));
      ++trials;
    }
  }
  EXPECT_GT(outside_without_filters, trials / 5) << outside_without_filters << " of " << trials;
}

TEST(SampleFilters, TopPKeepsTheShortestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 at T = 1: top-p 0.6 keeps two tokens, 0.5 one.
  const std::vector<float> v = {0.0f, std::log(0.5f), std::log(0.25f), std::log(0.25f)};
  sample::Settings s;
  s.temperature = 1.0f;
  std::set<int32_t> seen;
  for (s.top_p = 0.6f; s.seed < 400; ++s.seed) seen.insert(sample::Select(s, 3, v));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  s.top_p = 0.5f;
  for (s.seed = 0; s.seed < 50; ++s.seed) EXPECT_EQ(sample::Select(s, 3, v), 0);
  s.top_p = 1.0f;  // negative control: the whole row is reachable
  seen.clear();
  for (s.seed = 0; s.seed < 400; ++s.seed) seen.insert(sample::Select(s, 3, v));
  EXPECT_EQ(seen.size(), 4u);
}

TEST(SampleRepeatPenalty, PenalisesOnlyTheLastNTokensAsLlamaCppDoes) {
  const std::vector<float> v = {5.0f, 4.9f, -1.0f, -1.1f};
  sample::Settings s;  // greedy
  s.repeat_penalty = 1.1f;
  s.repeat_last_n = 2;
  const std::vector<int32_t> none;
  EXPECT_EQ(sample::Select(s, 9, v, none), 0);
  const std::vector<int32_t> recent_0 = {3, 0};
  EXPECT_EQ(sample::Select(s, 9, v, recent_0), 1);  // 5 / 1.1 = 4.55 < 4.9
  const std::vector<int32_t> old_0 = {0, 2, 3};     // 0 is beyond repeat_last_n = 2
  EXPECT_EQ(sample::Select(s, 9, v, old_0), 0);
  const std::vector<float> neg = {-1.0f, -1.05f};
  const std::vector<int32_t> recent_neg = {0};
  EXPECT_EQ(sample::Select(s, 9, neg, recent_neg), 1);  // -1 x 1.1 = -1.1 < -1.05
  s.repeat_penalty = 1.0f;  // negative control: off means the history is ignored
  EXPECT_EQ(sample::Select(s, 9, v, recent_0), 0);
}

TEST(SampleRepeatPenalty, SampledTokensDependOnTheWindowOnly) {
  sample::Settings s;
  s.temperature = 0.8f;
  s.repeat_penalty = 3.0f;
  s.repeat_last_n = 4;
  int changed = 0;
  std::vector<int32_t> scratch;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> v = RandomRow(trial, 64);
    s.seed = static_cast<uint64_t>(trial);
    const int32_t plain = sample::Select(s, trial, v);
    const int32_t x = plain, y = (plain + 1) % 64, z = (plain + 2) % 64, w = (plain + 3) % 64;
    const std::vector<int32_t> window = {x, y, z, w};
    const int32_t got = sample::Select(s, trial, v, window, &scratch);
    // Tokens before the window, and the order inside it, do not matter.
    const std::vector<int32_t> longer = {(plain + 9) % 64, (plain + 10) % 64, x, y, z, w};
    const std::vector<int32_t> shuffled = {w, z, y, x};
    ASSERT_EQ(sample::Select(s, trial, v, longer, &scratch), got) << "trial " << trial;
    ASSERT_EQ(sample::Select(s, trial, v, shuffled), got) << "trial " << trial;
    // Negative control: penalising the token chosen without a penalty moves the choice.
    changed += got != plain;
  }
  EXPECT_GT(changed, 20);
}

}  // namespace
}  // namespace lockstep

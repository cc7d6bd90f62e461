// Greedy and counter-based Gumbel-max sampling.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace lockstep::sample {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser: a bijective avalanche of 64 bits
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int32_t Argmax(std::span<const float> logits) {
  // The first index holding the maximum. The maximum is exact in any order, so it is found with
  // 16 independent running maxima (vectorizable; a full 262,144-token row in a fraction of the
  // scalar loop's time), then the first index equal to it. Same answer as a left-to-right scan
  // that keeps the earlier index on ties (+0 and -0 compare equal either way).
  const size_t n = logits.size();
  if (n == 0) return 0;
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  for (size_t l = 0; l < kLanes; ++l) lane[l] = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) lane[l] = logits[i + l] > lane[l] ? logits[i + l] : lane[l];
  float mx = lane[0];
  for (size_t l = 1; l < kLanes; ++l) mx = lane[l] > mx ? lane[l] : mx;
  for (; i < n; ++i) mx = logits[i] > mx ? logits[i] : mx;
  for (size_t j = 0; j < n; ++j)
    if (logits[j] == mx) return static_cast<int32_t>(j);
  return 0;  // only NaN logits
}

double UniformAt(uint64_t seed, int64_t position, int64_t index) {
  const uint64_t h =
      Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(position)) ^ static_cast<uint64_t>(index));
  // 53 random bits, offset by half an ulp so the value is never 0 or 1.
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int32_t Select(const Settings& s, int64_t position, std::span<const float> logits) {
  if (s.temperature <= 0.0f) return Argmax(logits);
  std::vector<int32_t> candidates;
  return Select(s, position, logits, &candidates);
}

int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::vector<int32_t>* scratch) {
  if (s.temperature <= 0.0f) return Argmax(logits);
  std::vector<int32_t>& candidates = *scratch;
  candidates.clear();  // empty: the whole vocabulary
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < logits.size()) {
    candidates.resize(logits.size());
    std::iota(candidates.begin(), candidates.end(), 0);
    std::partial_sort(candidates.begin(), candidates.begin() + s.top_k, candidates.end(),
                      [&](int32_t a, int32_t b) { return RanksBefore(logits.data(), a, b); });
    candidates.resize(static_cast<size_t>(s.top_k));
  }
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  int32_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  auto consider = [&](int32_t i) {
    const double g = -std::log(-std::log(UniformAt(s.seed, position, i)));
    const double score = static_cast<double>(logits[i]) * inv_t + g;
    if (best < 0 || score > best_score || (score == best_score && i < best)) {
      best = i;
      best_score = score;
    }
  };
  if (candidates.empty()) {
    for (size_t i = 0; i < logits.size(); ++i) consider(static_cast<int32_t>(i));
  } else {
    for (int32_t i : candidates) consider(i);
  }
  return best;
}

}  // namespace lockstep::sample

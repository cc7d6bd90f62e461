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

namespace {

// Logits after the repeat penalty: the sorted, distinct penalised ids live at the front of the
// scratch, so a lookup is a binary search over at most repeat_last_n ids.
class Values {
 public:
  Values(const Settings& s, std::span<const float> logits, std::span<const int32_t> recent,
         std::vector<int32_t>& scratch)
      : logits_(logits), penalty_(s.repeat_penalty) {
    scratch.clear();
    if (penalty_ != 1.0f && s.repeat_last_n > 0) {
      const size_t n = std::min(recent.size(), static_cast<size_t>(s.repeat_last_n));
      for (int32_t t : recent.subspan(recent.size() - n))
        if (t >= 0 && static_cast<size_t>(t) < logits.size()) scratch.push_back(t);
      std::sort(scratch.begin(), scratch.end());
      scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    }
    list_ = &scratch;
    n_ = scratch.size();
  }
  size_t n_penalised() const { return n_; }
  float operator()(int32_t i) const {
    const float v = logits_[static_cast<size_t>(i)];
    // Read through the vector: the candidates appended after the ids may reallocate it.
    const auto ids = list_->begin();
    if (n_ == 0 || !std::binary_search(ids, ids + static_cast<std::ptrdiff_t>(n_), i)) return v;
    return v > 0.0f ? v / penalty_ : v * penalty_;
  }
  bool RanksBefore(int32_t a, int32_t b) const {
    const float va = (*this)(a), vb = (*this)(b);
    return va > vb || (va == vb && a < b);
  }

 private:
  std::span<const float> logits_;
  float penalty_;
  const std::vector<int32_t>* list_ = nullptr;
  size_t n_ = 0;
};

int32_t GreedyOf(const Values& v, size_t n) {
  int32_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v(static_cast<int32_t>(i)) > v(best)) best = static_cast<int32_t>(i);
  return best;
}

// Writes the candidates left by top-k, min-p and top-p into cand[from...]; returns false when no
// filter applies (every id stays a candidate and `cand` is untouched).
bool Filter(const Settings& s, const Values& v, size_t n, std::vector<int32_t>& cand, size_t from) {
  const auto by_rank = [&v](int32_t a, int32_t b) { return v.RanksBefore(a, b); };
  const bool top_k = s.top_k > 0 && static_cast<size_t>(s.top_k) < n;
  const bool min_p = s.min_p > 0.0f, top_p = s.top_p < 1.0f;
  if (!top_k && !min_p && !top_p) return false;
  cand.resize(from + n);
  for (size_t i = 0; i < n; ++i) cand[from + i] = static_cast<int32_t>(i);
  auto begin = cand.begin() + static_cast<std::ptrdiff_t>(from);
  size_t size = n;
  if (top_k) {
    std::partial_sort(begin, begin + s.top_k, cand.end(), by_rank);
    size = static_cast<size_t>(s.top_k);
  }
  const double t = static_cast<double>(s.temperature);
  double best = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < size; ++i) best = std::max(best, static_cast<double>(v(begin[i])));
  if (min_p) {
    const double floor = best + t * std::log(static_cast<double>(s.min_p));
    const auto keep_end =
        std::partition(begin, begin + static_cast<std::ptrdiff_t>(size),
                       [&](int32_t i) { return static_cast<double>(v(i)) >= floor; });
    size = static_cast<size_t>(keep_end - begin);
  }
  if (top_p && size > 1) {
    // The mass is summed over the candidates in id order, the prefix taken in rank order.
    std::sort(begin, begin + static_cast<std::ptrdiff_t>(size));
    double total = 0;
    for (size_t i = 0; i < size; ++i)
      total += std::exp((static_cast<double>(v(begin[i])) - best) / t);
    std::sort(begin, begin + static_cast<std::ptrdiff_t>(size), by_rank);
    double mass = 0;
    size_t keep = 0;
    while (keep < size && mass < static_cast<double>(s.top_p) * total)
      mass += std::exp((static_cast<double>(v(begin[keep++])) - best) / t);
    size = std::max<size_t>(keep, 1);
  }
  cand.resize(from + size);
  return true;
}

}  // namespace

bool IsArgmax(const Settings& s, std::span<const int32_t> recent) {
  const bool penalise = s.repeat_penalty != 1.0f && !recent.empty() && s.repeat_last_n > 0;
  return s.temperature <= 0.0f && !penalise;
}

bool NeedsScratch(const Settings& s) {
  return s.temperature > 0.0f || s.repeat_penalty != 1.0f;
}

int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::span<const int32_t> recent) {
  if (IsArgmax(s, recent)) return Argmax(logits);
  std::vector<int32_t> scratch;
  return Select(s, position, logits, recent, &scratch);
}

int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::vector<int32_t>* scratch) {
  return Select(s, position, logits, {}, scratch);
}

int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::span<const int32_t> recent, std::vector<int32_t>* scratch) {
  if (IsArgmax(s, recent)) return Argmax(logits);
  const Values v(s, logits, recent, *scratch);
  if (s.temperature <= 0.0f) return GreedyOf(v, logits.size());
  const size_t from = v.n_penalised();
  const bool filtered = Filter(s, v, logits.size(), *scratch, from);
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  int32_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  auto consider = [&](int32_t i) {
    const double g = -std::log(-std::log(UniformAt(s.seed, position, i)));
    const double score = static_cast<double>(v(i)) * inv_t + g;
    if (best < 0 || score > best_score || (score == best_score && i < best)) {
      best = i;
      best_score = score;
    }
  };
  if (!filtered) {
    for (size_t i = 0; i < logits.size(); ++i) consider(static_cast<int32_t>(i));
  } else {
    for (size_t k = from; k < scratch->size(); ++k) consider((*scratch)[k]);
  }
  return best;
}

}  // namespace lockstep::sample

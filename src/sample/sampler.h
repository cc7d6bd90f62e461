// Token selection as a pure function of (settings, seed, absolute position, logits), so the
// same token comes out whether a row was computed in plain decode or in a verify batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::sample {

struct Settings {
  float temperature = 0.0f;  // 0 = greedy
  uint64_t seed = 0;
  int top_k = 0;  // 0 = whole vocabulary
};

// Greedy's order, the one ranking used wherever lockstep ranks ids by value (top-k sampling,
// expert routing, centroid selection, the lab's ranks): the higher value first, equal values
// to the lower id, so a ranking never depends on the sort algorithm.
inline bool RanksBefore(const float* values, int32_t a, int32_t b) {
  return values[a] > values[b] || (values[a] == values[b] && a < b);
}

// Greedy: the highest logit, ties to the lowest id.
int32_t Argmax(std::span<const float> logits);

// Greedy when temperature is 0; otherwise Gumbel-max: argmax_i(logit_i / T + g_i) where g_i
// is Gumbel noise from a counter-based generator keyed by (seed, position, i). Equivalent to
// sampling from softmax(logits / T), with no state carried between calls.
int32_t Select(const Settings& s, int64_t position, std::span<const float> logits);
// The same selection, with the top-k candidate list kept in `scratch` (reused between calls,
// so a caller that keeps it allocates nothing once it has grown to the vocabulary).
int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::vector<int32_t>* scratch);

// A uniform double in (0, 1) derived from (seed, position, index) alone.
double UniformAt(uint64_t seed, int64_t position, int64_t index);

}  // namespace lockstep::sample

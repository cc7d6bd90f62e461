// Token selection as a pure function of (settings, seed, absolute position, recent history,
// logits), so the same token comes out whether a row was computed in plain decode or in a
// verify batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::sample {

struct Settings {
  float temperature = 0.0f;  // 0 = greedy
  uint64_t seed = 0;
  int top_k = 0;               // 0 = whole vocabulary
  float top_p = 1.0f;          // keep the best tokens holding this probability mass (1 = all)
  float min_p = 0.0f;          // drop tokens below min_p x the best token's probability
  float repeat_penalty = 1.0f; // llama.cpp's: positive logits / penalty, negative x penalty
  int repeat_last_n = 64;      // how many preceding tokens the penalty looks at
};

// Greedy's order, the one ranking used wherever lockstep ranks ids by value (top-k sampling,
// expert routing, centroid selection, the lab's ranks): the higher value first, equal values
// to the lower id, so a ranking never depends on the sort algorithm.
inline bool RanksBefore(const float* values, int32_t a, int32_t b) {
  return values[a] > values[b] || (values[a] == values[b] && a < b);
}

// Greedy: the highest logit, ties to the lowest id.
int32_t Argmax(std::span<const float> logits);

// The pipeline, every stage a function of the row alone (no state carried between calls):
//  1. repeat penalty on the tokens in `recent` (the tokens before `position`, newest last; only
//     the last repeat_last_n count), as llama.cpp applies it;
//  2. greedy (the highest value, ties to the lowest id) when temperature is 0;
//  3. candidates: top-k by RanksBefore order, then min-p (value >= best + T ln min_p, i.e.
//     probability >= min_p x the best's), then top-p (the shortest best-first prefix whose
//     softmax mass, summed in id order, reaches top_p);
//  4. Gumbel-max over the candidates: argmax_i(value_i / T + g_i), g_i Gumbel noise from a
//     counter-based generator keyed by (seed, position, i) -- sampling from their softmax.
int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::span<const int32_t> recent = {});
// The same selection with its working lists in `scratch` (reused between calls, so a caller
// that keeps it allocates nothing once it has grown to the vocabulary plus repeat_last_n).
int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::span<const int32_t> recent, std::vector<int32_t>* scratch);
// Without history (no repeat penalty), for callers that have none.
int32_t Select(const Settings& s, int64_t position, std::span<const float> logits,
               std::vector<int32_t>* scratch);
// Whether the row's token is plain greedy, the argmax of its raw logits (no temperature and no
// repeat penalty that applies): backends may compute those rows on the device.
bool IsArgmax(const Settings& s, std::span<const int32_t> recent);
// Whether selection under `s` needs the scratch lists (anything beyond plain sampling).
bool NeedsScratch(const Settings& s);

// A uniform double in (0, 1) derived from (seed, position, index) alone.
double UniformAt(uint64_t seed, int64_t position, int64_t index);

}  // namespace lockstep::sample

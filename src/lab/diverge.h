// Where two token streams part, and whether the fork is a near-tie flip or a real divergence.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "lab/logprobs.h"
#include "model/model.h"

namespace lockstep::lab {

struct Divergence {
  bool identical = false;  // same length and same ids
  // First index where the streams differ; equals the shorter length when one is a prefix of
  // the other (then a or b has no token at the fork).
  int64_t index = 0;
  int64_t len_a = 0, len_b = 0;
  bool has_a() const { return index < len_a; }
  bool has_b() const { return index < len_b; }
};

Divergence FirstDivergence(std::span<const int32_t> a, std::span<const int32_t> b);

enum class ForkKind {
  kNearTie,  // both tokens are the model's top two, within the tie threshold
  kReal,     // at least one side chose a token the model does not nearly tie for first
};
const char* ForkKindName(ForkKind k);

struct ForkAnalysis {
  PositionStats a;  // a's token at the fork, scored (top-k and margin are the model's)
  PositionStats b;  // b's token, same logits
  double gap = 0;   // |logprob(a) - logprob(b)|
  ForkKind kind = ForkKind::kReal;
};

// Classifies one fork from the logits of the row that predicts it. A near-tie flip needs the
// two tokens to hold ranks 1 and 2 with a gap under the threshold: then either engine's choice
// is a legitimate rounding of the same distribution.
ForkAnalysis ClassifyFork(std::span<const float> logits, int32_t token_a, int32_t token_b,
                          const AnalyzeOptions& opt);

// Runs context + the common prefix through `model` and classifies the fork at d.index.
// Requires both streams to have a token at the fork.
Expected<ForkAnalysis> AnalyzeFork(const model::Model& model, std::span<const int32_t> context,
                                   std::span<const int32_t> a, std::span<const int32_t> b,
                                   const Divergence& d, const AnalyzeOptions& opt);

}  // namespace lockstep::lab

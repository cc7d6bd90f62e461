// Teacher-forced analysis: for each position of a fixed token stream, the stream token's
// logprob and rank under a model, the model's top-k, and the top-1/top-2 margin.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace lockstep::lab {

struct TopEntry {
  int32_t id = 0;
  double logprob = 0;
};

// One scored position. Ranks and top lists order by logit, ties to the lower id (the order
// greedy selection uses, so rank 1 is exactly the token greedy decoding would pick).
struct PositionStats {
  int64_t index = 0;   // index of the token in the stream
  int64_t pos = 0;     // absolute position of the token (context included)
  int32_t token = 0;   // the stream's token at this position
  double logprob = 0;  // its log-softmax at temperature 1
  int64_t rank = 0;    // 1 = the model's greedy choice
  std::vector<TopEntry> top;
  double margin = 0;  // logprob(top-1) - logprob(top-2); >= 0
  bool near_tie = false;
};

struct AnalyzeOptions {
  int top_k = 5;
  double tie_threshold = 0.1;  // a margin below this (in nats) is a near-tie
};

// Scores `token` against one logits row. Log-softmax is summed in double so the reported
// logprobs do not depend on the vocabulary order beyond the logits themselves.
PositionStats AnalyzeLogits(std::span<const float> logits, int32_t token,
                            const AnalyzeOptions& opt);

// Runs context + stream through `model` (prefill chunks of `chunk` rows; results do not
// depend on it) and scores every stream token that has at least one token before it. With an
// empty context the first stream token is the context and is not scored.
Expected<std::vector<PositionStats>> TeacherForce(const model::Model& model,
                                                  std::span<const int32_t> context,
                                                  std::span<const int32_t> stream,
                                                  const AnalyzeOptions& opt, int chunk = 128);

}  // namespace lockstep::lab

// Forced-stream acceptance: real speculative decoding, through the engine, with the target's
// selections replaced by a fixed token stream, so drafters, engines or builds are compared on
// identical content and the counters are generate --draft's by construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "speculative/acceptance.h"
#include "speculative/proposer.h"

namespace lockstep::lab {

struct AcceptOptions {
  int draft_max = 3;
  int segment = 64;       // stream tokens per segment of the per-segment table
  bool adaptive = false;  // fixed K by default: acceptance at one K is what engines compare
  float p_min = 0.0f;     // drafter probability floor, as generate --draft-p-min
  int prefill_chunk = 256;
};

struct SegmentStats {
  int64_t begin = 0, end = 0;  // stream index range [begin, end) of the rounds' start tokens
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
};

struct AcceptResult {
  speculative::DraftStats stats;  // the counters generate --draft reports
  std::vector<SegmentStats> segments;
  int64_t greedy_match = 0;  // stream tokens equal to the target's own greedy choice
  int64_t scored = 0;        // stream tokens the target chose a token for
  // Accepted drafts per round that drafted anything.
  double mean_accepted() const;
};

// Speculates along `stream` after `context` (with an empty context the first stream token is
// the prompt): each round drafts from the engine's state, the target verifies, and drafts count
// as accepted while they equal the stream. On a stream that is the target's own greedy output
// this is exactly a generate --draft run (same counters, same rounds).
Expected<AcceptResult> MeasureAcceptance(const model::Model& target,
                                         speculative::Proposer& proposer,
                                         std::span<const int32_t> context,
                                         std::span<const int32_t> stream, const AcceptOptions& opt);

}  // namespace lockstep::lab

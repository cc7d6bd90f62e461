// Forced-stream acceptance: speculative decoding replayed along a fixed token stream, so
// drafters, engines or builds are compared on identical content.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "spec/generate.h"
#include "spec/proposer.h"

namespace lockstep::lab {

// The target teacher-forced over context + stream once: its cache holds every position and
// `hidden` every row's post-norm state, so any number of drafters can replay against it.
struct ForcedPass {
  std::vector<int32_t> all;  // context + stream
  int n_prompt = 0;          // positions before the first stream token the replay emits
  int n_context = 0;         // context tokens before the stream (stream index = pos - this)
  std::unique_ptr<kv::KvCache> kv;
  int n_embd = 0;
  std::vector<float> hidden;  // [all.size() - 1, n_embd]; row p predicted position p + 1
  int64_t greedy_match = 0;   // stream tokens equal to the target's own greedy choice
  int64_t scored = 0;         // stream tokens with a predicting row
};

// With an empty context the first stream token serves as the prompt.
Expected<ForcedPass> RunForcedPass(const model::Model& target, std::span<const int32_t> context,
                                   std::span<const int32_t> stream, int chunk = 128);

struct AcceptOptions {
  int draft_max = 3;
  int segment = 64;  // stream tokens per segment of the per-segment table
};

struct SegmentStats {
  int64_t begin = 0, end = 0;  // stream index range [begin, end) of the rounds' start tokens
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
};

struct AcceptResult {
  spec::DraftStats stats;  // same counters generate --draft reports
  std::vector<SegmentStats> segments;
  // Accepted drafts per round that drafted anything.
  double mean_accepted() const;
};

// Replays the speculative loop of spec::GenerateWithProposer along the stream: a round at
// position pos drafts from (stream[pos], hidden of row pos - 1, cache < pos), counts the
// drafts matching stream[pos + 1 ..], and advances pos by accepted + 1. On a stream that is
// the target's own greedy output this reproduces generate --draft's counters exactly.
Expected<AcceptResult> ReplayAcceptance(ForcedPass& pass, spec::Proposer& proposer,
                                        const AcceptOptions& opt);

}  // namespace lockstep::lab

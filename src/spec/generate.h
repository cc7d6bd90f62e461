// Text generation loops over a target model: plain decode and (with a drafter) speculative
// decode. Both select every token with the same pure function of (settings, position, logits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace lockstep::spec {

struct GenerateOptions {
  int n_predict = 64;
  sample::Settings sampling;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  int n_ctx = 0;                     // 0: prompt + n_predict (+ draft room)
  int prefill_chunk = 256;           // rows per prefill forward; never changes results
  int draft_max = 3;                 // speculative only
  float draft_p_min = 0.0f;          // speculative only
};

struct DraftStats {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  std::vector<int64_t> drafted_at;   // per draft position
  std::vector<int64_t> accepted_at;
  double rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (prompt excluded)
  double prompt_ms = 0;
  double generate_ms = 0;
  DraftStats draft;
};

// Plain decoding: prefill in chunks, then one row per step.
Expected<GenerateResult> GeneratePlain(const model::Model& target,
                                       std::span<const int32_t> prompt,
                                       const GenerateOptions& opt);

// Speculative decoding with a Gemma 4 assistant drafter: draft up to draft_max tokens, verify
// [last, d1..dK] in one target pass, keep the longest prefix equal to the target's own
// selections. Produces exactly GeneratePlain's tokens (the exactness contract).
Expected<GenerateResult> GenerateSpeculative(const model::Model& target,
                                             const model::Model& draft,
                                             std::span<const int32_t> prompt,
                                             const GenerateOptions& opt);

}  // namespace lockstep::spec

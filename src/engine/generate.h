// One prompt through the engine: what `lockstep generate`, the benches and the tests call when
// a single sequence is all they need. It is the engine's own step loop, not a second one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace lockstep::engine {

struct GenerateOptions {
  int n_predict = 64;
  sample::Settings sampling;
  std::vector<int32_t> stop_tokens;
  int n_ctx = 0;               // 0: prompt + n_predict
  int prefill_chunk = 256;     // rows per prefill step; never changes results
  int draft_max = 3;           // speculative only
  float draft_p_min = 0.0f;    // speculative only
  bool adaptive_draft = true;  // speculative only
  DType cache_type_k = DType::F32, cache_type_v = DType::F32;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (prompt excluded)
  double prompt_ms = 0;
  double generate_ms = 0;
  speculative::DraftStats draft;
};

// Plain decoding when `proposer` is null, else speculative decoding with it.
Expected<GenerateResult> Generate(const model::Model& target, speculative::Proposer* proposer,
                                  std::span<const int32_t> prompt, const GenerateOptions& opt);
// Speculative decoding with a Gemma 4 assistant drafter (paired and checked here).
Expected<GenerateResult> GenerateSpeculative(const model::Model& target, const model::Model& draft,
                                             std::span<const int32_t> prompt,
                                             const GenerateOptions& opt);
// Teacher forcing through the engine: feeds tokens[0, n - 1) in prefill chunks and calls
// sink(pos, logits) for every pos in [first, n) with the logits of the row that predicts it,
// in ascending order.
using ScoreSink = std::function<void(int32_t pos, std::span<const float> logits)>;
Status TeacherForce(const model::Model& model, std::span<const int32_t> tokens, int first,
                    int chunk, const ScoreSink& sink);

// The engine options for one sequence of this prompt under `opt`.
Options SingleSequenceOptions(std::span<const int32_t> prompt, const GenerateOptions& opt,
                              bool speculative);
Request ToRequest(std::span<const int32_t> prompt, const GenerateOptions& opt, bool speculative);

}  // namespace lockstep::engine

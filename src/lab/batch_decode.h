// Several sequences decoded together: every forward call carries one row per live sequence,
// each in its own KV slot. The probe's batch-width experiment runs on it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace lockstep::lab {

struct BatchDecodeOptions {
  int n_predict = 32;
  sample::Settings sampling;         // token choice is a pure function of (settings, pos, logits)
  std::vector<int32_t> stop_tokens;  // a sequence stops after emitting one
  int prefill_rows = 64;             // rows per prefill forward, interleaved across sequences
};

// Returns the generated ids of each prompt, in prompt order.
Expected<std::vector<std::vector<int32_t>>> DecodeBatch(
    const model::Model& model, const std::vector<std::vector<int32_t>>& prompts,
    const BatchDecodeOptions& opt);

}  // namespace lockstep::lab

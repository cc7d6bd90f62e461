// Draft proposers for speculative decoding, and the loop generic over them. The loop's output
// never depends on what a proposer drafts (only its speed does), so tests may plug in any
// proposer, including adversarial ones.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/assistant.h"
#include "spec/generate.h"

namespace lockstep::spec {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Drafts up to `max` (>= 1) tokens to follow `last`. `last` sits at position `pos` and is not
  // yet in `target_kv` (which holds every position < pos of slot 0); `h` is the target's
  // post-norm hidden state of the row whose logits selected `last`. Fewer (even zero) drafts
  // are fine.
  virtual Status Draft(int32_t last, std::span<const float> h, int pos, int max,
                       kv::KvCache& target_kv, std::vector<int32_t>* drafts) = 0;
};

// The Gemma 4 assistant as a proposer: greedy drafts at one fixed query position (the drafter
// cannot extend the cache), stopping early when the draft's probability (softmax over the
// drafter's logits) falls below p_min.
class AssistantProposer : public Proposer {
 public:
  AssistantProposer(const model::Assistant& assistant, float p_min)
      : assistant_(assistant), p_min_(p_min) {}
  Status Draft(int32_t last, std::span<const float> h, int pos, int max, kv::KvCache& target_kv,
               std::vector<int32_t>* drafts) override;

 private:
  const model::Assistant& assistant_;
  float p_min_;
  model::DraftResult out_;
  std::vector<float> h_;
};

// Softmax probability of token `id` under `logits` (-inf entries carry no mass).
float TokenProbability(std::span<const float> logits, int32_t id);

// The speculative loop over any proposer; GenerateSpeculative uses AssistantProposer.
Expected<GenerateResult> GenerateWithProposer(const model::Model& target, Proposer& proposer,
                                              std::span<const int32_t> prompt,
                                              const GenerateOptions& opt);

}  // namespace lockstep::spec

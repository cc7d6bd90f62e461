// Draft proposers for speculative decoding. A proposer drafts for every speculating sequence of
// a step in one call (the assistant runs one drafter forward per draft position for all of
// them). The engine's output never depends on what a proposer drafts (only its speed does), so
// tests may plug in any proposer, including adversarial ones.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/assistant.h"
#include "model/batch.h"

namespace lockstep::speculative {

// One sequence's drafting request.
struct DraftRequest {
  int32_t last = 0;        // emitted token at `pos`, not yet in the target cache
  int32_t pos = 0;         // the target cache holds every position < pos of `slot`
  int32_t slot = 0;        // target KV sequence slot
  int max = 1;             // drafts wanted (>= 1); fewer, even none, are fine
  float p_min = 0.0f;      // stop when a draft's probability under the drafter falls below
  int32_t hidden_row = 0;  // row of `hidden` with the target state whose logits selected `last`
  // The sequence so far: prompt then emitted tokens, ending with `last` (n-gram and oracle
  // proposers read it; the assistant does not).
  std::span<const int32_t> history;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills out[i] (cleared first) with drafts for reqs[i]. `hidden` holds target post-norm hidden
  // states in backend memory.
  virtual Status Draft(std::span<const DraftRequest> reqs, const backend::Tensor& hidden,
                       kv::KvCache& target_kv, std::span<std::vector<int32_t>* const> out) = 0;
};

// The Gemma 4 assistant as a proposer: greedy drafts at one fixed query position per sequence
// (the drafter cannot extend the cache). Draft step j runs one drafter forward over every
// sequence still drafting.
class AssistantProposer : public Proposer {
 public:
  // max_seqs: most sequences drafting in one call (sizes the workspace once).
  AssistantProposer(const model::Assistant& assistant, int max_seqs);
  Status Draft(std::span<const DraftRequest> reqs, const backend::Tensor& hidden,
               kv::KvCache& target_kv, std::span<std::vector<int32_t>* const> out) override;

 private:
  const model::Assistant& assistant_;
  model::Workspace ws_;
  model::Batch batch_;
  std::vector<int32_t> active_, next_active_, tokens_, rows_, ids_;
  std::vector<backend::SampleRow> greedy_;
  std::vector<float> host_logits_;
  backend::IntTensor ids_dev_, rows_dev_;
};

// Softmax probability of token `id` under `logits` (-inf entries carry no mass).
float TokenProbability(std::span<const float> logits, int32_t id);

}  // namespace lockstep::speculative

// The assistant drafter as a batched speculative-decoding proposer.
#include "speculative/proposer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::speculative {

float TokenProbability(std::span<const float> logits, int32_t id) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  if (!std::isfinite(mx)) return 0.0f;
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<float>(std::exp(static_cast<double>(logits[id]) - mx) / sum);
}

AssistantProposer::AssistantProposer(const model::Assistant& assistant, int max_seqs)
    : assistant_(assistant), ws_(assistant.NewWorkspace(std::max(1, max_seqs))) {
  const size_t n = static_cast<size_t>(std::max(1, max_seqs));
  for (auto* v : {&active_, &next_active_, &tokens_, &rows_, &ids_}) v->reserve(n);
  greedy_.resize(n);  // temperature 0: argmax, ties to the lowest id
  backend::Backend& be = assistant.drafter().backend();
  ids_dev_ = be.NewIntTensor(static_cast<int64_t>(n));
  rows_dev_ = be.NewIntTensor(static_cast<int64_t>(n));
}

Status AssistantProposer::Draft(std::span<const DraftRequest> reqs, const backend::Tensor& hidden,
                                kv::KvCache& target_kv,
                                std::span<std::vector<int32_t>* const> out) {
  backend::Backend& be = assistant_.drafter().backend();
  const int64_t bb = assistant_.n_bb();
  active_.clear();
  rows_.clear();
  tokens_.clear();
  for (size_t i = 0; i < reqs.size(); ++i) {
    out[i]->clear();
    if (reqs[i].max <= 0) continue;
    active_.push_back(static_cast<int32_t>(i));
    rows_.push_back(reqs[i].hidden_row);
    tokens_.push_back(reqs[i].last);
  }
  if (active_.empty()) return Status::Ok();
  // Step 0 reads the target's hidden states; later steps the drafter's own h_next.
  be.Upload(rows_, &rows_dev_);
  backend::Tensor h_in = ws_.act.draft_h.View(static_cast<int64_t>(active_.size()), bb);
  be.GatherRows(hidden, rows_dev_.first(static_cast<int64_t>(rows_.size())), &h_in);
  model::DraftOutputs step;
  while (!active_.empty()) {
    // Every step queries the same position: the drafter reads the target's cache (keys < pos)
    // and cannot append its own rows to it.
    batch_.Clear();
    for (size_t r = 0; r < active_.size(); ++r) {
      const DraftRequest& q = reqs[static_cast<size_t>(active_[r])];
      batch_.Add(tokens_[r], q.pos, q.slot, true);
    }
    LS_RETURN_IF_ERROR(assistant_.Step(batch_, target_kv, ws_, &step));
    const int n = step.n;
    be.SelectTokens(step.logits, std::span(greedy_).first(static_cast<size_t>(n)), &ids_dev_);
    ids_.resize(static_cast<size_t>(n));
    be.Download(ids_dev_, ids_);
    bool need_probs = false;
    for (int32_t i : active_) need_probs = need_probs || reqs[static_cast<size_t>(i)].p_min > 0;
    if (need_probs) be.ToHost(step.logits, &host_logits_);
    next_active_.clear();
    rows_.clear();
    for (int r = 0; r < n; ++r) {
      const size_t i = static_cast<size_t>(active_[static_cast<size_t>(r)]);
      const int32_t d = ids_[static_cast<size_t>(r)];
      if (reqs[i].p_min > 0.0f) {
        const size_t V = static_cast<size_t>(step.logits.cols());
        const std::span<const float> row(host_logits_.data() + static_cast<size_t>(r) * V, V);
        if (TokenProbability(row, d) < reqs[i].p_min) continue;
      }
      out[i]->push_back(d);
      if (static_cast<int>(out[i]->size()) >= reqs[i].max) continue;
      tokens_[next_active_.size()] = d;
      next_active_.push_back(static_cast<int32_t>(i));
      rows_.push_back(r);
    }
    std::swap(active_, next_active_);
    if (active_.empty()) break;
    tokens_.resize(active_.size());
    be.Upload(rows_, &rows_dev_);
    backend::Tensor h_next_in = ws_.act.draft_h.View(static_cast<int64_t>(rows_.size()), bb);
    be.GatherRows(step.h_next, rows_dev_.first(static_cast<int64_t>(rows_.size())), &h_next_in);
  }
  return Status::Ok();
}

}  // namespace lockstep::speculative

// The assistant drafter as a speculative-decoding proposer.
#include "spec/proposer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sample/sampler.h"

namespace lockstep::spec {

float TokenProbability(std::span<const float> logits, int32_t id) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  if (!std::isfinite(mx)) return 0.0f;
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<float>(std::exp(static_cast<double>(logits[id]) - mx) / sum);
}

Status AssistantProposer::Draft(int32_t last, std::span<const float> h, int pos, int max,
                                kv::KvCache& target_kv, std::vector<int32_t>* drafts) {
  drafts->clear();
  h_.assign(h.begin(), h.end());
  int32_t tok = last;
  const int32_t seq = 0;
  for (int j = 0; j < max; ++j) {
    // Every step queries the same position: the drafter reads the target's cache (keys < pos)
    // and cannot append its own rows to it.
    model::DraftRows rows{{&tok, 1}, h_, {&pos, 1}, {&seq, 1}};
    LS_RETURN_IF_ERROR(assistant_.Step(rows, target_kv, &out_));
    std::span<const float> logits(out_.logits_row(0), static_cast<size_t>(out_.n_vocab));
    const int32_t d = sample::Argmax(logits);
    if (p_min_ > 0.0f && TokenProbability(logits, d) < p_min_) break;
    drafts->push_back(d);
    tok = d;
    h_.assign(out_.h_row(0), out_.h_row(0) + out_.n_bb);
  }
  return Status::Ok();
}

}  // namespace lockstep::spec

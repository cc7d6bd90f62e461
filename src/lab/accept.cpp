// Acceptance along a forced stream, measured by the engine's own speculative rounds.
#include "lab/accept.h"

#include <algorithm>

#include "engine/engine.h"

namespace lockstep::lab {

double AcceptResult::mean_accepted() const {
  int64_t drafting = 0;  // rounds with at least one draft
  for (const auto& s : segments) drafting += s.rounds;
  return drafting ? static_cast<double>(stats.accepted) / drafting : 0.0;
}

Expected<AcceptResult> MeasureAcceptance(const model::Model& target,
                                         speculative::Proposer& proposer,
                                         std::span<const int32_t> context,
                                         std::span<const int32_t> stream,
                                         const AcceptOptions& opt) {
  if (opt.draft_max < 1) return Status::Errorf("accept: draft_max {} < 1", opt.draft_max);
  const size_t n_lead = context.empty() ? 1 : 0;  // stream tokens that serve as the prompt
  if (stream.size() < n_lead + 2)
    return Status::Errorf("accept: the stream needs at least 2 tokens after the prompt (has {})",
                          stream.size() - std::min(stream.size(), n_lead));
  engine::Request req;
  req.prompt.assign(context.begin(), context.end());
  req.prompt.insert(req.prompt.end(), stream.begin(), stream.begin() + n_lead);
  req.forced.assign(stream.begin() + n_lead, stream.end());
  req.draft_max = opt.draft_max;
  req.adaptive_draft = opt.adaptive;
  req.draft_p_min = opt.p_min;
  req.record_rounds = true;
  engine::Options eo;
  eo.n_ctx = static_cast<int>(context.size() + stream.size());
  eo.prefill_chunk = std::max(1, opt.prefill_chunk);
  eo.draft_max = opt.draft_max;
  LS_ASSIGN_OR_RETURN(auto eng, engine::Engine::Create(target, &proposer, eo));
  std::vector<engine::Request> one;
  one.push_back(std::move(req));
  LS_ASSIGN_OR_RETURN(auto results, engine::RunAll(*eng, std::move(one)));
  engine::SeqResult& r = results[0];
  AcceptResult res;
  res.stats = std::move(r.draft);
  res.greedy_match = r.target_agreed;
  res.scored = static_cast<int64_t>(r.tokens.size());
  const int64_t seg = std::max(1, opt.segment);
  const int64_t n_stream = static_cast<int64_t>(stream.size());
  for (const engine::Round& round : r.rounds) {
    if (round.drafted == 0) continue;
    // The round starts from the last emitted token: its index in the stream.
    const int64_t index = round.start - 1 + static_cast<int64_t>(n_lead);
    const size_t s = static_cast<size_t>(index / seg);
    while (res.segments.size() <= s) {
      const int64_t b = static_cast<int64_t>(res.segments.size()) * seg;
      res.segments.push_back({b, std::min(b + seg, n_stream), 0, 0, 0});
    }
    ++res.segments[s].rounds;
    res.segments[s].drafted += round.drafted;
    res.segments[s].accepted += round.accepted;
  }
  return res;
}

}  // namespace lockstep::lab

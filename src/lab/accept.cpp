// The forced pass and the acceptance replay over it.
#include "lab/accept.h"

#include <algorithm>

#include "sample/sampler.h"

namespace lockstep::lab {

Expected<ForcedPass> RunForcedPass(const model::Model& target, std::span<const int32_t> context,
                                   std::span<const int32_t> stream, int chunk) {
  ForcedPass pass;
  pass.all.assign(context.begin(), context.end());
  pass.all.insert(pass.all.end(), stream.begin(), stream.end());
  pass.n_context = static_cast<int>(context.size());
  pass.n_prompt = std::max(1, pass.n_context);
  const int n = static_cast<int>(pass.all.size());
  if (n < pass.n_prompt + 2)
    return Status::Errorf("accept: the stream needs at least 2 tokens after the prompt (has {})",
                          n - pass.n_prompt);
  const int n_vocab = target.config().n_vocab;
  for (int p = 0; p < n; ++p)
    if (pass.all[p] >= n_vocab)
      return Status::Errorf("accept: token {} at position {} is outside the vocabulary ({})",
                            pass.all[p], p, n_vocab);
  // Replay drafts at every earlier position after the whole pass: rings must keep all n
  // positions (max_step_rows = n makes the ring the whole context).
  LS_ASSIGN_OR_RETURN(pass.kv, target.NewKv(1, n, n));
  pass.n_embd = target.config().n_embd;
  pass.hidden.resize(static_cast<size_t>(n - 1) * pass.n_embd);
  model::ForwardResult res;
  model::ForwardOptions fwd;
  fwd.want_hidden = true;
  model::Batch batch;
  chunk = std::max(1, chunk);
  // Rows 0..n-2 predict something; the last token's row is never needed.
  for (int start = 0; start < n - 1; start += chunk) {
    batch.Clear();
    const int end = std::min(n - 1, start + chunk);
    for (int p = start; p < end; ++p) batch.Add(pass.all[p], p, 0, true);
    LS_RETURN_IF_ERROR(target.Forward(batch, *pass.kv, &res, fwd));
    for (size_t r = 0; r < res.rows.size(); ++r) {
      const int p = batch.pos[static_cast<size_t>(res.rows[r])];
      std::copy(res.hidden_row(r), res.hidden_row(r) + pass.n_embd,
                pass.hidden.begin() + static_cast<ptrdiff_t>(p) * pass.n_embd);
      if (p + 1 < pass.n_prompt) continue;
      ++pass.scored;
      const int32_t g = sample::Argmax(std::span<const float>(res.logits_row(r), size_t(n_vocab)));
      pass.greedy_match += g == pass.all[p + 1];
    }
  }
  return pass;
}

double AcceptResult::mean_accepted() const {
  int64_t drafting = 0;  // rounds with at least one draft
  for (const auto& s : segments) drafting += s.rounds;
  return drafting ? static_cast<double>(stats.accepted) / drafting : 0.0;
}

Expected<AcceptResult> ReplayAcceptance(ForcedPass& pass, spec::Proposer& proposer,
                                        const AcceptOptions& opt) {
  if (opt.draft_max < 1) return Status::Errorf("accept: draft_max {} < 1", opt.draft_max);
  const int n = static_cast<int>(pass.all.size());
  const int n_ctx = pass.n_context;
  const int seg = std::max(1, opt.segment);
  AcceptResult res;
  auto& st = res.stats;
  st.drafted_at.assign(static_cast<size_t>(opt.draft_max), 0);
  st.accepted_at.assign(static_cast<size_t>(opt.draft_max), 0);
  std::vector<int32_t> drafts;
  // `last` = all[pos] is emitted but its row is not consulted; hidden row pos - 1 produced it.
  for (int pos = pass.n_prompt; pos < n - 1;) {
    const int k_max = std::min(opt.draft_max, n - 2 - pos);  // keep the bonus token in range
    drafts.clear();
    std::span<const float> h(pass.hidden.data() + static_cast<ptrdiff_t>(pos - 1) * pass.n_embd,
                             static_cast<size_t>(pass.n_embd));
    if (k_max > 0)
      LS_RETURN_IF_ERROR(proposer.Draft(pass.all[pos], h, pos, k_max, *pass.kv, &drafts));
    if (drafts.size() > static_cast<size_t>(k_max)) drafts.resize(static_cast<size_t>(k_max));
    const int n_draft = static_cast<int>(drafts.size());
    int accepted = 0;
    while (accepted < n_draft && drafts[accepted] == pass.all[pos + 1 + accepted]) ++accepted;
    ++st.rounds;
    st.drafted += n_draft;
    st.accepted += accepted;
    for (int j = 0; j < n_draft; ++j) ++st.drafted_at[static_cast<size_t>(j)];
    for (int j = 0; j < accepted; ++j) ++st.accepted_at[static_cast<size_t>(j)];
    if (n_draft > 0) {
      const int64_t index = pos - n_ctx;  // stream index of the round's start token
      const size_t s = static_cast<size_t>(index / seg);
      while (res.segments.size() <= s) {
        const int64_t b = static_cast<int64_t>(res.segments.size()) * seg;
        res.segments.push_back({b, std::min<int64_t>(b + seg, n - n_ctx), 0, 0, 0});
      }
      ++res.segments[s].rounds;
      res.segments[s].drafted += n_draft;
      res.segments[s].accepted += accepted;
    }
    pos += accepted + 1;
  }
  return res;
}

}  // namespace lockstep::lab

// Speculative decoding: the proposer drafts, the target verifies [last, d1..dK] in one forward,
// every token is the target's own selection at its absolute position. Emits exactly what
// GeneratePlain emits because a verify row's logits are byte-identical to the decode row's
// (every backend op computes a row from that row alone; docs/speculative.md).
#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "model/assistant.h"
#include "spec/generate.h"
#include "spec/loop_common.h"
#include "spec/proposer.h"

namespace lockstep::spec {
namespace {

void CountRound(int n_draft, int n_accepted, DraftStats* s) {
  ++s->rounds;
  s->drafted += n_draft;
  s->accepted += n_accepted;
  for (int j = 0; j < n_draft; ++j) ++s->drafted_at[static_cast<size_t>(j)];
  for (int j = 0; j < n_accepted; ++j) ++s->accepted_at[static_cast<size_t>(j)];
}

}  // namespace

Expected<GenerateResult> GenerateWithProposer(const model::Model& target, Proposer& proposer,
                                              std::span<const int32_t> prompt,
                                              const GenerateOptions& opt) {
  if (opt.draft_max < 0) return Status::Errorf("generate: draft_max {} < 0", opt.draft_max);
  // Drafts are capped by the tokens still to emit, so verify never writes past the last
  // position plain decode writes: the same context suffices.
  LS_ASSIGN_OR_RETURN(const int n_ctx, ContextSize(prompt, opt));
  const int n_prompt = static_cast<int>(prompt.size());
  // A step writes a prefill chunk or a verify batch of up to draft_max + 1 rows.
  LS_ASSIGN_OR_RETURN(auto kv,
                      target.NewKv(1, n_ctx, std::max({1, opt.prefill_chunk, opt.draft_max + 1})));
  GenerateResult res;
  res.draft.drafted_at.assign(static_cast<size_t>(opt.draft_max), 0);
  res.draft.accepted_at.assign(static_cast<size_t>(opt.draft_max), 0);
  model::ForwardResult out;
  model::Batch batch;
  model::ForwardOptions fwd;
  fwd.want_hidden = true;  // the drafter's input is the target's post-norm hidden state
  auto t0 = std::chrono::steady_clock::now();
  LS_RETURN_IF_ERROR(Prefill(target, prompt, opt, true, *kv, &out));
  res.prompt_ms = MsSince(t0);
  t0 = std::chrono::steady_clock::now();
  if (opt.n_predict <= 0) return res;

  // `last` is emitted but not yet in the cache; it sits at `pos`; `h` produced it.
  int pos = n_prompt;
  auto row_logits = [&out](size_t i) {
    return std::span<const float>(out.logits_row(i), static_cast<size_t>(out.n_vocab));
  };
  int32_t last = sample::Select(opt.sampling, pos, row_logits(0));
  std::vector<float> h(out.hidden_row(0), out.hidden_row(0) + out.n_embd);
  bool done = Emit(opt, last, &res);
  std::vector<int32_t> drafts;
  while (!done) {
    const int remaining = opt.n_predict - static_cast<int>(res.tokens.size());
    const int k_max = std::min(opt.draft_max, remaining - 1);  // a round emits <= drafts + 1
    drafts.clear();
    if (k_max > 0) LS_RETURN_IF_ERROR(proposer.Draft(last, h, pos, k_max, *kv, &drafts));
    if (drafts.size() > static_cast<size_t>(k_max)) drafts.resize(static_cast<size_t>(k_max));
    const int n_draft = static_cast<int>(drafts.size());

    batch.Clear();
    batch.Add(last, pos, 0, true);
    for (int i = 0; i < n_draft; ++i) batch.Add(drafts[i], pos + 1 + i, 0, true);
    LS_RETURN_IF_ERROR(target.Forward(batch, *kv, &out, fwd));
    CHECK(out.rows.size() == static_cast<size_t>(n_draft + 1));

    // Row i selects the token at position pos + 1 + i, exactly as plain decode would.
    int accepted = 0;
    int32_t chosen = sample::Select(opt.sampling, pos + 1, row_logits(0));
    while (accepted < n_draft && chosen == drafts[static_cast<size_t>(accepted)]) {
      ++accepted;
      chosen = sample::Select(opt.sampling, pos + 1 + accepted, row_logits(accepted));
    }
    CountRound(n_draft, accepted, &res.draft);
    for (int i = 0; i < accepted && !done; ++i) done = Emit(opt, drafts[i], &res);
    if (!done) done = Emit(opt, chosen, &res);
    // Rows past the accepted ones stay in the cache as garbage: nothing reads a position
    // beyond its own, and the next round overwrites them.
    pos += accepted + 1;
    last = chosen;
    h.assign(out.hidden_row(accepted), out.hidden_row(accepted) + out.n_embd);
  }
  res.generate_ms = MsSince(t0);
  return res;
}

Expected<GenerateResult> GenerateSpeculative(const model::Model& target, const model::Model& draft,
                                             std::span<const int32_t> prompt,
                                             const GenerateOptions& opt) {
  LS_ASSIGN_OR_RETURN(auto assistant, model::Assistant::Pair(target, draft));
  AssistantProposer proposer(*assistant, opt.draft_p_min);
  return GenerateWithProposer(target, proposer, prompt, opt);
}

}  // namespace lockstep::spec

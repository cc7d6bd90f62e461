// Engine step internals: batched drafting, building the one target batch, applying its token
// ids (acceptance, emission, rollback, finishing).
#include <algorithm>

#include "core/check.h"
#include "engine/engine.h"
#include "engine/sequence.h"

namespace lockstep::engine {

Status Engine::Draft() {
  for (auto& s : slots_)
    if (s) s->drafts.clear();
  if (!proposer_) return Status::Ok();
  draft_reqs_.clear();
  draft_outs_.clear();
  // Every decoding sequence gets one row; drafts share what is left of the step's rows (of
  // draft_rows, when set).
  int budget = opt_.draft_rows > 0 ? std::min(opt_.max_rows, opt_.draft_rows) : opt_.max_rows;
  for (const auto& s : slots_)
    if (s && s->decoding) --budget;
  for (auto& sp : slots_) {
    if (!sp || !sp->decoding || sp->req.draft_max == 0) continue;
    Seq& s = *sp;
    // A round emits at most drafts + 1 tokens, and verify writes positions up to
    // n_cached + k: never past what plain decoding writes.
    int k = std::min({s.policy.Next(), s.remaining() - 1, opt_.n_ctx - 1 - s.n_cached, budget});
    if (k <= 0) continue;
    budget -= k;
    speculative::DraftRequest q;
    q.last = s.last;
    q.pos = s.n_cached;
    q.slot = s.slot;
    q.max = k;
    q.p_min = s.req.draft_p_min;
    q.hidden_row = s.slot;
    q.history = s.history;
    draft_reqs_.push_back(q);
    draft_outs_.push_back(&s.drafts);
  }
  if (draft_reqs_.empty()) return Status::Ok();
  LS_RETURN_IF_ERROR(proposer_->Draft(draft_reqs_, hidden_carry_, *kv_, draft_outs_));
  for (size_t i = 0; i < draft_reqs_.size(); ++i)
    if (draft_outs_[i]->size() > static_cast<size_t>(draft_reqs_[i].max))
      draft_outs_[i]->resize(static_cast<size_t>(draft_reqs_[i].max));
  return Status::Ok();
}

void Engine::BuildBatch() {
  batch_.Clear();
  for (auto& s : slots_)
    if (s) s->n_rows = s->n_out = 0;
  // Decode and verify rows first (they hold up a user waiting for tokens), in slot order.
  for (auto& sp : slots_) {
    if (!sp || !sp->decoding) continue;
    Seq& s = *sp;
    s.row_begin = batch_.size();
    s.out_begin = static_cast<int>(batch_.out_rows.size());
    batch_.Add(s.last, s.n_cached, s.slot, true);
    for (size_t i = 0; i < s.drafts.size(); ++i)
      batch_.Add(s.drafts[i], s.n_cached + 1 + static_cast<int>(i), s.slot, true);
    s.n_rows = s.n_out = 1 + static_cast<int>(s.drafts.size());
  }
  // Prompt chunks fill the rest of the step.
  for (auto& sp : slots_) {
    if (!sp || sp->decoding) continue;
    Seq& s = *sp;
    const int left = opt_.max_rows - batch_.size();
    if (left <= 0) break;
    const int n_prompt = static_cast<int>(s.req.prompt.size());
    const int end = std::min({n_prompt, s.n_cached + opt_.prefill_chunk, s.n_cached + left});
    s.row_begin = batch_.size();
    s.out_begin = static_cast<int>(batch_.out_rows.size());
    for (int p = s.n_cached; p < end; ++p) {
      const bool report = s.req.logits_from >= 0 && p + 1 >= s.req.logits_from;
      if (batch_.Add(s.req.prompt[static_cast<size_t>(p)], p, s.slot,
                     report || p == n_prompt - 1) >= 0)
        ++s.n_out;
    }
    s.n_rows = end - s.n_cached;
  }
}

// Emits one token of `s` chosen by output row `out` (ids_[out] is the target's selection).
// Returns true when the sequence has ended.
bool Engine::Emit(Seq& s, int32_t token, int out) {
  const int32_t target_choice = ids_[static_cast<size_t>(out)];
  if (!s.req.forced.empty()) {
    token = s.req.forced[s.result.tokens.size()];
    s.result.target_agreed += target_choice == token;
  }
  if (logits_sink_ && s.req.logits_from >= 0) {
    const size_t V = static_cast<size_t>(target_.config().n_vocab);
    const int row = batch_.out_rows[static_cast<size_t>(out)];
    logits_sink_(s.id, batch_.pos[static_cast<size_t>(row)] + 1,
                 {host_logits_.data() + static_cast<size_t>(out) * V, V});
  }
  s.result.tokens.push_back(token);
  s.history.push_back(token);
  s.last = token;
  if (token_sink_) token_sink_(s.id, token);
  const auto& stops = s.req.stop_tokens;
  if (std::find(stops.begin(), stops.end(), token) != stops.end())
    s.ending = Finish::kStop;
  else if (s.remaining() <= 0)
    s.ending = Finish::kLength;
  return s.ending.has_value();
}

void Engine::Apply() {
  copy_src_host_.clear();
  copy_dst_host_.clear();
  const size_t V = static_cast<size_t>(target_.config().n_vocab);
  for (auto& sp : slots_) {
    if (!sp || sp->n_rows == 0) continue;
    Seq& s = *sp;
    int hidden_out = -1;  // output row whose state selected the new `last`
    if (!s.decoding) {
      const int n_prompt = static_cast<int>(s.req.prompt.size());
      // The row that ends the prompt reports through Emit, unless nothing is generated.
      const bool ends = s.n_cached + s.n_rows == n_prompt;
      const int reported = ends && s.req.n_predict > 0 ? s.n_out - 1 : s.n_out;
      for (int o = 0; o < reported && logits_sink_; ++o) {
        const int row = batch_.out_rows[static_cast<size_t>(s.out_begin + o)];
        logits_sink_(s.id, batch_.pos[static_cast<size_t>(row)] + 1,
                     {host_logits_.data() + static_cast<size_t>(s.out_begin + o) * V, V});
      }
      s.n_cached += s.n_rows;
      if (s.n_cached < n_prompt) continue;
      s.result.prompt_ms = s.timer.Ms();
      s.timer.Restart();
      s.decoding = true;
      const int out = s.out_begin + s.n_out - 1;
      if (s.req.n_predict == 0) {
        s.ending = Finish::kLength;
        continue;
      }
      if (!Emit(s, ids_[static_cast<size_t>(out)], out)) hidden_out = out;
    } else {
      const int n_draft = s.n_rows - 1;
      const std::span<const int32_t> chosen(ids_.data() + s.out_begin,
                                            static_cast<size_t>(s.n_out));
      // Teacher forcing checks drafts against the forced stream instead of the selections.
      const size_t done = s.result.tokens.size();
      const std::span<const int32_t> truth =
          s.req.forced.empty()
              ? chosen
              : std::span<const int32_t>(s.req.forced)
                    .subspan(done, std::min(chosen.size(), s.req.forced.size() - done));
      const int accepted = speculative::AcceptedPrefix(s.drafts, truth);
      const int64_t start = static_cast<int64_t>(s.result.tokens.size());
      bool ended = false;
      for (int i = 0; i <= accepted && !ended; ++i)
        ended = Emit(s, chosen[static_cast<size_t>(i)], s.out_begin + i);
      if (n_draft > 0) {
        s.result.rounds.push_back({start, n_draft, accepted});
        s.policy.Update(n_draft, accepted);
      }
      if (!ended) {
        // The last token and the accepted drafts are now cached; rejected rows are forgotten.
        s.n_cached += accepted + 1;
        kv_->Truncate(s.slot, s.n_cached);
        hidden_out = s.out_begin + accepted;
      }
    }
    if (hidden_out >= 0 && proposer_ && s.req.draft_max > 0) {
      copy_src_host_.push_back(hidden_out);
      copy_dst_host_.push_back(s.slot);
    }
  }
  if (!copy_src_host_.empty()) {
    backend::Backend& be = target_.backend();
    be.Upload(copy_src_host_, &copy_src_);
    be.Upload(copy_dst_host_, &copy_dst_);
    const int64_t n = static_cast<int64_t>(copy_src_host_.size());
    be.CopyRows(out_.hidden, copy_src_.first(n), &hidden_carry_, copy_dst_.first(n));
  }
  for (auto& sp : slots_)
    if (sp && sp->ending) Finish(*sp, *sp->ending);
}

}  // namespace lockstep::engine

// Engine: admission, cancellation, drafting and the step's single target forward.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/check.h"
#include "core/memory.h"
#include "engine/sequence.h"

namespace lockstep::engine {

Engine::Engine(const model::Model& target, speculative::Proposer* proposer, const Options& opt)
    : target_(target),
      proposer_(proposer),
      opt_(opt),
      ws_(target.backend(), target.config(), opt.max_rows, opt.max_rows) {}

Engine::~Engine() = default;

Status RequireTarget(const model::Model& target) {
  if (!target.config().is_assistant()) return Status::Ok();
  return Status::Errorf(
      "{}: this is a Gemma 4 assistant (drafter) model, not a target; load a target model and "
      "pass this file as the drafter (--draft)",
      target.file().path());
}

Expected<std::unique_ptr<Engine>> Engine::Create(const model::Model& target,
                                                 speculative::Proposer* proposer,
                                                 const Options& options) {
  Options opt = options;
  LS_RETURN_IF_ERROR(RequireTarget(target));
  if (opt.n_seq_max < 1) return Status::Errorf("engine: n_seq_max {} < 1", opt.n_seq_max);
  if (opt.n_ctx < 2) return Status::Errorf("engine: context {} < 2", opt.n_ctx);
  if (opt.prefill_chunk < 1)
    return Status::Errorf("engine: prefill chunk {} < 1", opt.prefill_chunk);
  if (opt.draft_max < 0) return Status::Errorf("engine: draft_max {} < 0", opt.draft_max);
  if (opt.draft_max > 0 && !proposer)
    return Status::Error("engine: draft_max > 0 needs a proposer (a drafter model)");
  if (opt.max_rows <= 0)
    opt.max_rows = opt.prefill_chunk + opt.n_seq_max * (opt.draft_max + 1) + opt.max_logit_rows;
  // Every decoding sequence gets at least one row per step.
  if (opt.max_rows < opt.n_seq_max)
    return Status::Errorf("engine: {} rows per step cannot carry {} sequences", opt.max_rows,
                          opt.n_seq_max);
  // Estimate before allocating: an impossible context is a message, not std::bad_alloc.
  const int step_rows = std::max(opt.prefill_chunk, opt.draft_max + 1);
  kv::CacheConfig cache = target.KvConfig(opt.n_seq_max, opt.n_ctx);
  cache.max_step_rows = step_rows;
  cache.type_k = opt.cache_type_k;
  cache.type_v = opt.cache_type_v;
  const double need =
      static_cast<double>(kv::KvCache::BytesPerSequence(cache, opt.n_ctx)) * opt.n_seq_max +
      4.0 * opt.max_rows * target.config().n_vocab;  // the logits buffer
  const double have = static_cast<double>(PhysicalMemoryBytes());
  if (have > 0 && need > have)
    return Status::Errorf(
        "engine: {} sequence(s) of {} positions need {:.1f} GiB (KV cache and logits), more than "
        "this machine's {:.1f} GiB; lower the context (-c) or the parallel sequences, or use "
        "--cache-type-k/v f16",
        opt.n_seq_max, opt.n_ctx, need / (1 << 30), have / (1 << 30));
  std::unique_ptr<Engine> e(new Engine(target, proposer, opt));
  backend::Backend& be = target.backend();
  // One sequence writes at most a prefill chunk or a verify pass per step: the sliding rings
  // are sized for that (kv/kv_cache.h).
  LS_ASSIGN_OR_RETURN(e->kv_, target.NewKv(opt.n_seq_max, opt.n_ctx, step_rows, opt.cache_type_k,
                                           opt.cache_type_v));
  e->hidden_carry_ = be.NewTensor(opt.n_seq_max, target.config().n_embd);
  e->ids_dev_ = be.NewIntTensor(opt.max_rows);
  e->copy_src_ = be.NewIntTensor(opt.n_seq_max);
  e->copy_dst_ = be.NewIntTensor(opt.n_seq_max);
  e->slots_.resize(static_cast<size_t>(opt.n_seq_max));
  const size_t rows = static_cast<size_t>(opt.max_rows), seqs = static_cast<size_t>(opt.n_seq_max);
  e->ids_.reserve(rows);
  e->sample_rows_.reserve(rows);
  e->copy_src_host_.reserve(seqs);
  e->copy_dst_host_.reserve(seqs);
  e->draft_reqs_.reserve(seqs);
  e->draft_outs_.reserve(seqs);
  e->batch_.tokens.reserve(rows);
  e->batch_.pos.reserve(rows);
  e->batch_.seq.reserve(rows);
  e->batch_.out_rows.reserve(rows);
  return e;
}

Expected<SeqId> Engine::Submit(Request req) {
  const model::ModelConfig& c = target_.config();
  if (req.prompt.empty()) return Status::Error("request: the prompt has no tokens");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= c.n_vocab)
      return Status::Errorf("request: prompt token {} = {} outside the vocabulary of {}", i,
                            req.prompt[i], c.n_vocab);
  for (int32_t t : req.forced)
    if (t < 0 || t >= c.n_vocab)
      return Status::Errorf("request: forced token {} outside the vocabulary of {}", t, c.n_vocab);
  if (!req.forced.empty()) req.n_predict = static_cast<int>(req.forced.size());
  if (req.n_predict < 0) return Status::Errorf("request: n_predict {} < 0", req.n_predict);
  const int64_t need = static_cast<int64_t>(req.prompt.size()) + req.n_predict;
  if (need > opt_.n_ctx)
    return Status::Errorf("request: prompt ({}) + n_predict ({}) exceeds the context ({})",
                          req.prompt.size(), req.n_predict, opt_.n_ctx);
  const sample::Settings& st = req.sampling;
  if (!(st.top_p > 0.0f && st.top_p <= 1.0f) || !(st.min_p >= 0.0f && st.min_p <= 1.0f) ||
      !(st.repeat_penalty > 0.0f && std::isfinite(st.repeat_penalty)) || st.repeat_last_n < 0)
    return Status::Errorf(
        "request: top_p {} (0, 1], min_p {} [0, 1], repeat_penalty {} > 0, "
        "repeat_last_n {} >= 0 required",
        st.top_p, st.min_p, st.repeat_penalty, st.repeat_last_n);
  if (req.draft_max < 0 || req.draft_max > opt_.draft_max)
    return Status::Errorf("request: draft_max {} outside [0, {}] (the engine's draft_max)",
                          req.draft_max, opt_.draft_max);
  auto s = std::make_unique<Seq>(next_id_++, std::move(req));
  const SeqId id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

void Engine::Cancel(SeqId id) {
  cancelled_.push_back(id);
}

bool Engine::Idle() const {
  if (!waiting_.empty()) return false;
  for (const auto& s : slots_)
    if (s) return false;
  return true;
}

std::vector<SeqResult> Engine::TakeFinished() {
  std::vector<SeqResult> out;
  out.swap(finished_);
  return out;
}

void Engine::Finish(Seq& s, engine::Finish why) {
  s.result.finish = why;
  // Counters only now: which drafts count depends on where the stream ended.
  s.result.draft = speculative::DraftStats::FromRounds(
      &s.result.rounds, static_cast<int64_t>(s.result.tokens.size()), s.req.draft_max);
  if (!s.req.record_rounds) s.result.rounds.clear();
  s.result.generate_ms = s.timer.Ms();
  if (s.slot >= 0) {
    kv_->Release(s.slot);
    finished_.push_back(std::move(s.result));
    slots_[static_cast<size_t>(s.slot)].reset();  // destroys s
  } else {
    finished_.push_back(std::move(s.result));
  }
}

void Engine::Admit() {
  for (SeqId id : cancelled_) {
    for (auto& slot : slots_)
      if (slot && slot->id == id) Finish(*slot, Finish::kCancelled);
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
      if ((*it)->id == id) {
        Finish(**it, Finish::kCancelled);
        waiting_.erase(it);
        break;
      }
  }
  cancelled_.clear();
  while (!waiting_.empty()) {
    std::unique_ptr<Seq>& s = waiting_.front();
    if (s->req.n_predict == 0 && s->req.logits_from < 0) {  // nothing to compute
      finished_.push_back(std::move(s->result));
      waiting_.pop_front();
      continue;
    }
    const auto free = std::find(slots_.begin(), slots_.end(), nullptr);
    if (free == slots_.end()) break;
    const int slot = static_cast<int>(free - slots_.begin());
    s->Start(slot, opt_.draft_max);
    *free = std::move(s);
    waiting_.pop_front();
    if (opt_.prefix_sharing) ShareCachedPrefix(**free);
  }
}

// A new sequence whose prompt starts with tokens another running sequence has already cached
// takes those positions from its cache instead of recomputing them: the rows would be
// byte-identical (each row depends only on its sequence's tokens and positions).
void Engine::ShareCachedPrefix(Seq& s) {
  if (s.req.logits_from >= 0) return;  // the lab wants every row computed here
  const std::vector<int32_t>& p = s.req.prompt;
  int best = 0, best_slot = -1;
  for (const auto& o : slots_) {
    if (!o || o.get() == &s) continue;
    const int n = std::min<int>(o->n_cached, static_cast<int>(p.size()) - 1);
    int common = 0;
    while (common < n && o->history[static_cast<size_t>(common)] == p[static_cast<size_t>(common)])
      ++common;
    if (common > best) best = common, best_slot = o->slot;
  }
  if (best_slot < 0) return;
  if (!kv_->SharePrefix(s.slot, best_slot, best).ok()) return;
  s.n_cached = best;
  s.result.n_shared = best;
}

// One selection row per output row: its settings, the position it chooses, and (with a repeat
// penalty) its history, copied into recent_, which grows once and only with penalties.
void Engine::BuildSampleRows() {
  // The repeat penalty's history of a row at `pos`: the tokens at positions before pos + 1,
  // which are the sequence's history and then, on verify rows, its drafts.
  const auto window = [](const Seq& s, int64_t pos) -> size_t {
    const sample::Settings& st = s.req.sampling;
    if (st.repeat_penalty == 1.0f || st.repeat_last_n <= 0) return 0;
    return static_cast<size_t>(std::min<int64_t>(st.repeat_last_n, pos + 1));
  };
  const auto token_at = [](const Seq& s, int64_t q) {
    const size_t h = s.history.size();
    if (static_cast<size_t>(q) < h) return s.history[static_cast<size_t>(q)];
    CHECKF(static_cast<size_t>(q) - h < s.drafts.size(),
           "repeat window: position {} past the drafts", q);
    return s.drafts[static_cast<size_t>(q) - h];
  };
  sample_rows_.clear();
  size_t n_recent = 0;
  for (int o = 0; o < out_.n_out; ++o) {
    const int r = batch_.out_rows[static_cast<size_t>(o)];
    const Seq& s = *slots_[static_cast<size_t>(batch_.seq[static_cast<size_t>(r)])];
    n_recent += window(s, batch_.pos[static_cast<size_t>(r)]);
  }
  if (recent_.size() < n_recent) recent_.resize(n_recent);  // grows once, only with penalties
  size_t at = 0;
  for (int o = 0; o < out_.n_out; ++o) {
    const int r = batch_.out_rows[static_cast<size_t>(o)];
    const Seq& s = *slots_[static_cast<size_t>(batch_.seq[static_cast<size_t>(r)])];
    const int64_t pos = batch_.pos[static_cast<size_t>(r)];
    const size_t n = window(s, pos);
    for (size_t k = 0; k < n; ++k)
      recent_[at + k] = token_at(s, pos + 1 - static_cast<int64_t>(n - k));
    sample_rows_.push_back({s.req.sampling, pos + 1, {recent_.data() + at, n}});
    at += n;
  }
}

Status Engine::Step() {
  Admit();
  LS_RETURN_IF_ERROR(Draft());
  BuildBatch();
  last_rows_ = batch_.size();
  if (batch_.size() == 0) return Status::Ok();
  LS_RETURN_IF_ERROR(target_.Forward(batch_, *kv_, ws_, &out_));
  // Only token ids cross to the host (and logits where a request asked for them).
  BuildSampleRows();
  if (out_.n_out > 0) {
    target_.backend().SelectTokens(out_.logits, sample_rows_, &ids_dev_);
    ids_.resize(static_cast<size_t>(out_.n_out));
    target_.backend().Download(ids_dev_, ids_);
  }
  bool want_logits = false;
  for (const auto& s : slots_) want_logits = want_logits || (s && s->req.logits_from >= 0);
  if (want_logits && out_.n_out > 0) target_.backend().ToHost(out_.logits, &host_logits_);
  Apply();
  return Status::Ok();
}

Expected<std::vector<SeqResult>> RunAll(Engine& engine, std::vector<Request> requests) {
  std::vector<SeqId> ids;
  for (Request& r : requests) {
    LS_ASSIGN_OR_RETURN(SeqId id, engine.Submit(std::move(r)));
    ids.push_back(id);
  }
  std::vector<SeqResult> done;
  while (!engine.Idle()) {
    LS_RETURN_IF_ERROR(engine.Step());
    for (SeqResult& r : engine.TakeFinished()) done.push_back(std::move(r));
  }
  for (SeqResult& r : engine.TakeFinished()) done.push_back(std::move(r));
  std::vector<SeqResult> ordered;
  for (SeqId id : ids)
    for (SeqResult& r : done)
      if (r.id == id) ordered.push_back(std::move(r));
  return ordered;
}

}  // namespace lockstep::engine

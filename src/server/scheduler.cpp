// The engine thread: admission into free slots, cancellation, steps, and token delivery.
#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"

namespace lockstep::server {

bool RequestStream::Poll(size_t from, std::chrono::milliseconds slice, std::vector<int32_t>* tokens,
                         std::vector<TokenLogprob>* logprobs) {
  std::unique_lock lock(mu_);
  if (from >= tokens_.size() && !done_)
    cv_.wait_for(lock, slice, [&] { return done_ || tokens_.size() > from; });
  for (size_t i = from; i < tokens_.size(); ++i) {
    tokens->push_back(tokens_[i]);
    if (i < logprobs_.size()) logprobs->push_back(logprobs_[i]);
  }
  return done_;
}

void RequestStream::Push(int32_t token, std::optional<TokenLogprob> logprob) {
  {
    std::lock_guard lock(mu_);
    tokens_.push_back(token);
    if (logprob) logprobs_.push_back(std::move(*logprob));
  }
  cv_.notify_all();
}

void RequestStream::Finish(engine::SeqResult result, Status error) {
  {
    std::lock_guard lock(mu_);
    result_ = std::move(result);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

Scheduler::Scheduler(engine::Engine& engine, const SchedulerOptions& opt, Metrics& metrics)
    : engine_(engine), opt_(opt), metrics_(metrics) {
  CHECK(opt.n_slots >= 1 && opt.n_slots <= engine.options().n_seq_max);
  slots_.resize(static_cast<size_t>(opt.n_slots));
  engine_.set_token_sink([this](engine::SeqId id, int32_t token) { OnToken(id, token); });
  engine_.set_logits_sink(
      [this](engine::SeqId id, int32_t, std::span<const float> logits) { OnLogits(id, logits); });
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  Shutdown();
}

std::shared_ptr<RequestStream> Scheduler::Submit(Job job, Refusal* why) {
  auto stream = std::make_shared<RequestStream>();
  stream->n_prompt_ = job.request.prompt.size();
  if (job.n_probs >= 0) job.request.logits_from = static_cast<int>(job.request.prompt.size());
  stream->job_ = std::move(job);
  {
    std::lock_guard lock(mu_);
    // Requests about to take a free slot do not wait: only those beyond the free slots count
    // against --max-queue (0 used to refuse every request, idle slots or not).
    const size_t free_slots =
        static_cast<size_t>(std::count(slots_.begin(), slots_.end(), nullptr));
    const size_t room = free_slots + static_cast<size_t>(opt_.max_queue);
    *why = stopping_                ? Refusal::kShuttingDown
           : queued_.size() >= room ? Refusal::kQueueFull
                                    : Refusal::kNone;
    if (*why != Refusal::kNone) return nullptr;
    queued_.push_back(stream);
  }
  wake_.notify_one();
  return stream;
}

void Scheduler::Cancel(const std::shared_ptr<RequestStream>& stream) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(stream);
  }
  wake_.notify_one();
}

void Scheduler::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

nlohmann::json Scheduler::Slots() const {
  const int n_ctx = engine_.options().n_ctx;
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    nlohmann::json slot = {{"id", i}, {"n_ctx", n_ctx}, {"is_processing", slots_[i] != nullptr}};
    if (slots_[i]) {
      const RequestStream& s = *slots_[i];
      std::lock_guard stream_lock(slots_[i]->mu_);
      slot["id_task"] = s.id_.load();
      slot["n_prompt_tokens"] = s.n_prompt_;
      slot["params"] = s.job_.summary;
      slot["next_token"] = {{"n_decoded", s.tokens_.size()}};
    }
    out.push_back(std::move(slot));
  }
  return out;
}

void Scheduler::Loop() {
  std::vector<std::shared_ptr<RequestStream>> admit, cancel;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stopping_ || !cancels_.empty() || !live_.empty() ||
               (!queued_.empty() && std::count(slots_.begin(), slots_.end(), nullptr) > 0);
      });
      if (stopping_) {
        // Everything still here ends as cancelled; the engine frees it in the steps below.
        for (auto& s : slots_)
          if (s) cancels_.push_back(s);
        for (auto& s : queued_) cancels_.push_back(s);
      }
      if (stopping_ && live_.empty() && queued_.empty()) return;
      cancel.swap(cancels_);
      for (size_t i = 0; i < slots_.size() && !queued_.empty() && !stopping_; ++i) {
        if (slots_[i]) continue;
        slots_[i] = queued_.front();
        slots_[i]->slot_.store(static_cast<int>(i));
        admit.push_back(std::move(queued_.front()));
        queued_.pop_front();
      }
      metrics_.SetQueue(static_cast<int>(live_.size() + admit.size()),
                        static_cast<int>(queued_.size()));
    }
    AdmitAndCancel(admit, cancel);
    StepEngine();
    // Again after the step, which ends requests: the gauges must not keep a finished one.
    std::lock_guard lock(mu_);
    metrics_.SetQueue(static_cast<int>(live_.size()), static_cast<int>(queued_.size()));
  }
}

void Scheduler::AdmitAndCancel(std::vector<std::shared_ptr<RequestStream>>& admit,
                               std::vector<std::shared_ptr<RequestStream>>& cancel) {
  for (auto& s : admit) {
    Expected<engine::SeqId> id = engine_.Submit(s->job_.request);
    if (!id.ok()) {
      {
        std::lock_guard lock(mu_);
        slots_[static_cast<size_t>(s->slot())] = nullptr;
      }
      s->Finish({}, id.status());
      continue;
    }
    s->id_.store(*id);
    live_[*id] = s;
  }
  admit.clear();
  for (auto& s : cancel) {
    if (const engine::SeqId id = s->id_.load(); id != 0) {
      if (live_.count(id)) engine_.Cancel(id);
      continue;
    }
    // Still queued (never reached the engine): it ends here.
    std::lock_guard lock(mu_);
    const auto it = std::find(queued_.begin(), queued_.end(), s);
    if (it == queued_.end()) continue;
    queued_.erase(it);
    engine::SeqResult r;
    r.finish = engine::Finish::kCancelled;
    s->Finish(std::move(r), Status::Ok());
  }
  cancel.clear();
}

void Scheduler::StepEngine() {
  Status step = Status::Ok();
  if (!engine_.Idle()) {
    step = engine_.Step();
    metrics_.OnStep(engine_.last_step_rows(), static_cast<int>(live_.size()));
  }
  std::vector<engine::SeqResult> done = engine_.TakeFinished();
  if (!step.ok()) {
    // A failed forward leaves no sequence trustworthy: end them all with the error.
    std::fprintf(stderr, "lockstep serve: engine step failed: %s\n", step.message().c_str());
    for (auto& [id, s] : live_) engine_.Cancel(id);
    while (!engine_.Idle() && engine_.Step().ok()) {
    }
    for (auto& r : engine_.TakeFinished()) done.push_back(std::move(r));
  }
  for (engine::SeqResult& r : done) {
    const auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    std::shared_ptr<RequestStream> s = it->second;
    live_.erase(it);
    metrics_.OnFinished(r, s->n_prompt_);
    {
      std::lock_guard lock(mu_);
      slots_[static_cast<size_t>(s->slot())] = nullptr;
    }
    s->Finish(std::move(r), step);
  }
}

void Scheduler::OnLogits(engine::SeqId id, std::span<const float> logits) {
  logits_row_.assign(logits.begin(), logits.end());
  logits_for_ = id;
}

void Scheduler::OnToken(engine::SeqId id, int32_t token) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  RequestStream& s = *it->second;
  std::optional<TokenLogprob> lp;
  // The engine reports a token's logits row right before the token itself.
  if (s.job_.n_probs >= 0 && logits_for_ == id) {
    lab::AnalyzeOptions opt;
    opt.top_k = std::max(1, s.job_.n_probs);
    lab::PositionStats stats = lab::AnalyzeLogits(logits_row_, token, opt);
    lp = TokenLogprob{stats.logprob, std::move(stats.top)};
    if (s.job_.n_probs == 0) lp->top.clear();
    logits_for_ = 0;
  }
  s.Push(token, std::move(lp));
}

}  // namespace lockstep::server

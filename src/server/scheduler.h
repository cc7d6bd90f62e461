// The server's engine thread: one thread owns the engine and runs its steps; HTTP handler
// threads submit jobs through a locked queue and read tokens from per-request streams. Jobs
// join and leave the engine between steps (continuous batching).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "lab/logprobs.h"
#include "server/metrics.h"

namespace lockstep::server {

using Clock = std::chrono::steady_clock;

// One emitted token's log-probability under the target (log-softmax of the raw logits, before
// temperature and top-k), with the best alternatives.
struct TokenLogprob {
  double logprob = 0;
  std::vector<lab::TopEntry> top;
};

struct Job {
  engine::Request request;
  int n_probs = -1;        // < 0: no logprobs; else this many alternatives per token
  nlohmann::json summary;  // shown by /slots while the job runs
};

// What a handler reads of its job. Written by the engine thread, read under the lock.
class RequestStream {
 public:
  // Copies tokens [from, ...) (and their logprobs) into the outputs, waiting up to `slice` when
  // there is nothing new. Returns true once the job is over and everything has been taken.
  bool Poll(size_t from, std::chrono::milliseconds slice, std::vector<int32_t>* tokens,
            std::vector<TokenLogprob>* logprobs);
  // Valid after Poll returned true: the engine's result (tokens, finish, draft counters,
  // timings) or the error that ended the job.
  const engine::SeqResult& result() const { return result_; }
  const Status& error() const { return error_; }
  Clock::time_point submitted() const { return submitted_; }
  // The slot the job runs in (-1 while queued).
  int slot() const { return slot_.load(std::memory_order_relaxed); }

 private:
  friend class Scheduler;
  void Push(int32_t token, std::optional<TokenLogprob> logprob);
  void Finish(engine::SeqResult result, Status error);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  engine::SeqResult result_;
  Status error_;
  // Engine-thread state (the scheduler's lock guards the queue, not these).
  Job job_;
  std::atomic<engine::SeqId> id_{0};  // 0 until the engine accepted the job (read by Slots)
  std::atomic<int> slot_{-1};
  size_t n_prompt_ = 0;
  Clock::time_point submitted_ = Clock::now();
};

enum class Refusal { kNone, kQueueFull, kShuttingDown };

struct SchedulerOptions {
  int n_slots = 1;     // sequences in the engine at once (its n_seq_max)
  int max_queue = 64;  // jobs waiting for a slot before Submit refuses (HTTP 429)
};

class Scheduler {
 public:
  // Starts the engine thread. The engine and metrics must outlive the scheduler.
  Scheduler(engine::Engine& engine, const SchedulerOptions& opt, Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; null (with the reason) when the queue is full or the server is stopping.
  std::shared_ptr<RequestStream> Submit(Job job, Refusal* why);
  // Ends a job at the engine's next step (a queued job ends at once); its KV is freed.
  void Cancel(const std::shared_ptr<RequestStream>& stream);
  // Cancels every job, lets the engine release them, and joins the thread. Idempotent.
  void Shutdown();

  // llama-server's /slots: one entry per slot, busy or idle.
  nlohmann::json Slots() const;
  int n_slots() const { return opt_.n_slots; }

 private:
  void Loop();
  void AdmitAndCancel(std::vector<std::shared_ptr<RequestStream>>& admit,
                      std::vector<std::shared_ptr<RequestStream>>& cancel);
  void StepEngine();
  void OnToken(engine::SeqId id, int32_t token);
  void OnLogits(engine::SeqId id, std::span<const float> logits);

  engine::Engine& engine_;
  const SchedulerOptions opt_;
  Metrics& metrics_;

  mutable std::mutex mu_;  // guards the fields up to `thread_`
  std::condition_variable wake_;
  std::deque<std::shared_ptr<RequestStream>> queued_;
  std::vector<std::shared_ptr<RequestStream>> cancels_;
  std::vector<std::shared_ptr<RequestStream>> slots_;  // by slot; null when free
  bool stopping_ = false;

  // Engine thread only.
  std::unordered_map<engine::SeqId, std::shared_ptr<RequestStream>> live_;
  std::vector<float> logits_row_;  // the row of the token about to be emitted
  engine::SeqId logits_for_ = 0;
  std::thread thread_;
};

}  // namespace lockstep::server

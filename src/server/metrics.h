// Server counters and latency histograms, rendered as Prometheus text for GET /metrics. The
// counters scripts already read from llama-server keep its `llamacpp:` names.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/refusals.h"

namespace lockstep::server {

// Cumulative buckets over fixed upper bounds (Prometheus' histogram type).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends the _bucket, _sum and _count lines of metric `name`.
  void Render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // Handler side.
  void OnRequest();
  void OnRejected(int http_status);
  void OnFirstToken(double seconds_since_submit);
  void OnResponse(double seconds_since_submit);
  // Engine thread.
  void OnStep(int rows, int busy_slots);
  void OnFinished(const engine::SeqResult& r, size_t n_prompt);
  void SetQueue(int processing, int deferred);

  // Listener, intake and worker threads: lock-free, and the caller keeps no other handle.
  RefusalCounts& refusals() { return refusals_; }

  std::string Render() const;

 private:
  mutable std::mutex mu_;
  uint64_t requests_ = 0, rejected_4xx_ = 0, rejected_5xx_ = 0, finished_ = 0, cancelled_ = 0;
  uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, predicted_tokens_ = 0;
  double prompt_seconds_ = 0, predicted_seconds_ = 0;
  uint64_t steps_ = 0, step_rows_ = 0, busy_slots_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0, draft_rounds_ = 0;
  int processing_ = 0, deferred_ = 0;
  Histogram ttft_, latency_, rows_per_step_;
  RefusalCounts refusals_;  // atomic: not guarded by mu_
};

}  // namespace lockstep::server

// Metrics bookkeeping and the Prometheus text exposition format.
#include "server/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace lockstep::server {
namespace {

void Line(std::string* out, const std::string& name, const char* type, const char* help,
          double value) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                      sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      latency_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}),
      rows_per_step_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {}

void Metrics::OnRequest() {
  std::lock_guard lock(mu_);
  ++requests_;
}

void Metrics::OnRejected(int http_status) {
  std::lock_guard lock(mu_);
  ++(http_status >= 500 ? rejected_5xx_ : rejected_4xx_);
}

void Metrics::OnFirstToken(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.Observe(seconds);
}

void Metrics::OnResponse(double seconds) {
  std::lock_guard lock(mu_);
  latency_.Observe(seconds);
}

void Metrics::OnStep(int rows, int busy_slots) {
  std::lock_guard lock(mu_);
  ++steps_;
  step_rows_ += static_cast<uint64_t>(rows);
  busy_slots_ += static_cast<uint64_t>(busy_slots);
  rows_per_step_.Observe(rows);
}

void Metrics::OnFinished(const engine::SeqResult& r, size_t n_prompt) {
  std::lock_guard lock(mu_);
  ++finished_;
  cancelled_ += r.finish == engine::Finish::kCancelled;
  prompt_tokens_ += n_prompt - static_cast<size_t>(std::min<int64_t>(r.n_shared, n_prompt));
  cached_prompt_tokens_ += static_cast<uint64_t>(r.n_shared);
  predicted_tokens_ += r.tokens.size();
  prompt_seconds_ += r.prompt_ms / 1000.0;
  predicted_seconds_ += r.generate_ms / 1000.0;
  drafted_ += static_cast<uint64_t>(r.draft.drafted);
  accepted_ += static_cast<uint64_t>(r.draft.accepted);
  draft_rounds_ += static_cast<uint64_t>(r.draft.rounds);
}

void Metrics::SetQueue(int processing, int deferred) {
  std::lock_guard lock(mu_);
  processing_ = processing;
  deferred_ = deferred;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  Line(&out, "llamacpp:prompt_tokens_total", "counter", "Prompt tokens computed.", prompt_tokens_);
  Line(&out, "llamacpp:prompt_seconds_total", "counter", "Prompt processing time.",
       prompt_seconds_);
  Line(&out, "llamacpp:tokens_predicted_total", "counter", "Generated tokens.", predicted_tokens_);
  Line(&out, "llamacpp:tokens_predicted_seconds_total", "counter", "Generation time.",
       predicted_seconds_);
  Line(&out, "llamacpp:n_decode_total", "counter", "Engine steps (one target forward each).",
       steps_);
  Line(&out, "llamacpp:n_busy_slots_per_decode", "gauge", "Average busy slots per step.",
       steps_ ? static_cast<double>(busy_slots_) / steps_ : 0.0);
  Line(&out, "llamacpp:requests_processing", "gauge", "Requests in a slot.", processing_);
  Line(&out, "llamacpp:requests_deferred", "gauge", "Requests waiting for a slot.", deferred_);
  Line(&out, "llamacpp:spec_decode_num_draft_tokens_total", "counter", "Drafted tokens.", drafted_);
  Line(&out, "llamacpp:spec_decode_num_accepted_tokens_total", "counter",
       "Accepted drafted tokens.", accepted_);
  Line(&out, "llamacpp:spec_decode_num_drafts_total", "counter", "Verify rounds with drafts.",
       draft_rounds_);
  Line(&out, "lockstep:requests_total", "counter", "Generation requests received.", requests_);
  Line(&out, "lockstep:requests_rejected_4xx_total", "counter", "Requests refused (4xx).",
       rejected_4xx_);
  Line(&out, "lockstep:requests_rejected_5xx_total", "counter", "Requests refused (5xx).",
       rejected_5xx_);
  Line(&out, "lockstep:requests_finished_total", "counter", "Generations finished.", finished_);
  Line(&out, "lockstep:requests_cancelled_total", "counter", "Generations cancelled.", cancelled_);
  Line(&out, "lockstep:prompt_tokens_cached_total", "counter",
       "Prompt positions shared from another sequence's cache.", cached_prompt_tokens_);
  Line(&out, "lockstep:step_rows_total", "counter", "Target rows over all steps.", step_rows_);
  rows_per_step_.Render("lockstep:step_rows", "Target batch rows per engine step.", &out);
  ttft_.Render("lockstep:time_to_first_token_seconds", "From submission to the first token.", &out);
  latency_.Render("lockstep:request_seconds", "From submission to the last byte.", &out);
  return out;
}

}  // namespace lockstep::server

// Metrics bookkeeping and the Prometheus text exposition format.
#include "server/metrics.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace lockstep::server {

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

namespace {

// One family per refusing stage, a `reason` label per limit: a connection refused before any
// request was read is not a request, so it gets its own family.
void RenderRefusals(const RefusalCounts& counts, std::string* out) {
  struct Family {
    const char* name;
    const char* help;
    std::vector<std::pair<const char*, LimitRefusal>> reasons;
  };
  const Family families[] = {
      {"lockstep:connections_refused_total",
       "Connections refused by the listener before any request was read.",
       {{"max_connections", LimitRefusal::kMaxConnections},
        {"max_connections_per_client", LimitRefusal::kMaxConnectionsPerClient}}},
      {"lockstep:requests_refused_total",
       "Requests refused by the transport before reaching a route: at a limit (408, 413, 431) "
       "or for framing it will not read (400, 501).",
       {{"header_timeout", LimitRefusal::kHeaderTimeout},
        {"header_too_large", LimitRefusal::kHeaderTooLarge},
        {"body_timeout", LimitRefusal::kBodyTimeout},
        {"body_too_large", LimitRefusal::kBodyTooLarge},
        {"bad_framing", LimitRefusal::kBadFraming},
        {"malformed_chunked_body", LimitRefusal::kMalformedChunkedBody},
        {"unsupported_transfer_encoding", LimitRefusal::kUnsupportedTransferEncoding}}},
  };
  for (const Family& f : families) {
    *out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", f.name, f.help, f.name);
    for (const auto& [label, reason] : f.reasons)
      *out += fmt::format("{}{{reason=\"{}\"}} {}\n", f.name, label, counts.Get(reason));
  }
}

}  // namespace

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
  struct Row {
    const char* name;
    bool counter;  // else a gauge
    const char* help;
    double value;
  };
  const Row rows[] = {
      {"llamacpp:prompt_tokens_total", true, "Prompt tokens computed.", 1.0 * prompt_tokens_},
      {"llamacpp:prompt_seconds_total", true, "Prompt processing time.", prompt_seconds_},
      {"llamacpp:tokens_predicted_total", true, "Generated tokens.", 1.0 * predicted_tokens_},
      {"llamacpp:tokens_predicted_seconds_total", true, "Generation time.", predicted_seconds_},
      {"llamacpp:n_decode_total", true, "Engine steps (one target forward each).", 1.0 * steps_},
      {"llamacpp:n_busy_slots_per_decode", false, "Average busy slots per step.",
       steps_ ? static_cast<double>(busy_slots_) / steps_ : 0.0},
      {"llamacpp:requests_processing", false, "Requests in a slot.", 1.0 * processing_},
      {"llamacpp:requests_deferred", false, "Requests waiting for a slot.", 1.0 * deferred_},
      {"llamacpp:spec_decode_num_draft_tokens_total", true, "Drafted tokens.", 1.0 * drafted_},
      {"llamacpp:spec_decode_num_accepted_tokens_total", true, "Accepted drafted tokens.",
       1.0 * accepted_},
      {"llamacpp:spec_decode_num_drafts_total", true, "Verify rounds with drafts.",
       1.0 * draft_rounds_},
      {"lockstep:requests_total", true, "Generation requests received.", 1.0 * requests_},
      {"lockstep:requests_rejected_4xx_total", true, "Requests refused (4xx).",
       1.0 * rejected_4xx_},
      {"lockstep:requests_rejected_5xx_total", true, "Requests refused (5xx).",
       1.0 * rejected_5xx_},
      {"lockstep:requests_finished_total", true, "Generations finished.", 1.0 * finished_},
      {"lockstep:requests_cancelled_total", true, "Generations cancelled.", 1.0 * cancelled_},
      {"lockstep:prompt_tokens_cached_total", true,
       "Prompt positions shared from another sequence's cache.", 1.0 * cached_prompt_tokens_},
      {"lockstep:step_rows_total", true, "Target rows over all steps.", 1.0 * step_rows_},
  };
  for (const Row& r : rows)
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", r.name, r.help, r.name,
                       r.counter ? "counter" : "gauge", r.name, r.value);
  rows_per_step_.Render("lockstep:step_rows", "Target batch rows per engine step.", &out);
  ttft_.Render("lockstep:time_to_first_token_seconds", "From submission to the first token.", &out);
  latency_.Render("lockstep:request_seconds", "From submission to the last byte.", &out);
  RenderRefusals(refusals_, &out);
  return out;
}

}  // namespace lockstep::server

// Request bodies to validated generation parameters. Everything here is untrusted input: each
// failure is a Status naming the field, which the routes return as an HTTP 400.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

// Server-wide defaults (command-line flags) a request may override.
struct RequestDefaults {
  float temperature = 0.8f;
  int top_k = 40;
  int64_t seed = -1;  // -1: a random seed per request (reported in the response)
  int draft_max = 0;  // 0: no drafter loaded
  float draft_p_min = 0.0f;
  int max_stop_strings = 16;
};

enum class Api {
  kCompletions,
  kChat,
  kLlama
};  // /v1/completions, /v1/chat/completions, /completion

struct CompletionParams {
  int n_predict = -1;  // -1: until the context is full
  sample::Settings sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int n_probs = -1;          // -1: no logprobs; else alternatives per token
  int draft_max = 0;         // speculative.n_max
  float draft_p_min = 0.0f;  // speculative.p_min
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool return_tokens = false;  // /completion: token ids in the response
  bool draft_rounds = false;   // lockstep: each verify round's [start, drafted, accepted]
  // Settings as the response's identity block reports them.
  nlohmann::json Settings() const;
};

// Reads typed fields of a JSON object; null counts as absent, unknown fields are ignored. The
// first wrong field is kept as the error and later reads return their defaults.
class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& object) : j_(object) {}
  bool Has(const char* key) const;
  double Number(const char* key, double fallback, double lo, double hi);
  int64_t Integer(const char* key, int64_t fallback, int64_t lo, int64_t hi);
  bool Bool(const char* key, bool fallback);
  std::string String(const char* key, const std::string& fallback);
  void Fail(Status s);
  const Status& status() const { return status_; }

 private:
  const nlohmann::json* Get(const char* key);
  const nlohmann::json& j_;
  Status status_;
};

// Sampling, length, stop, logprobs and streaming fields of a completion request for `api`.
Expected<CompletionParams> ParseCompletion(const nlohmann::json& body, Api api,
                                           const RequestDefaults& defaults);

// A prompt given as text, token ids, or a one-element array of either (OpenAI's batch form with
// a single prompt). Text is tokenized with the model's BOS policy.
Expected<std::vector<int32_t>> ParsePrompt(const nlohmann::json& prompt,
                                           const tokenizer::Tokenizer* tok, int32_t n_vocab);

// Token ids from a JSON array (detokenize, prompts), each in [0, n_vocab).
Expected<std::vector<int32_t>> ParseTokenIds(const nlohmann::json& ids, int32_t n_vocab,
                                             const char* field);

// Chat messages as OpenAI sends them, checked for shape before the chat template sees them.
Status CheckMessages(const nlohmann::json& messages);

}  // namespace lockstep::server

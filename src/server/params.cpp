// Typed, range-checked reading of completion request fields.
#include "server/params.h"

#include <cmath>
#include <limits>
#include <random>
#include <string_view>

namespace lockstep::server {
namespace {

const char* TypeName(const nlohmann::json& v) {
  return v.is_string()    ? "a string"
         : v.is_boolean() ? "a boolean"
         : v.is_number()  ? "a number"
         : v.is_array()   ? "an array"
         : v.is_object()  ? "an object"
                          : "null";
}

// Sampling parameters the sampler does not have yet: accepted only at their neutral value, so
// a client that sends them gets exactly what it asked for or a clear refusal.
Status CheckNeutral(FieldReader& f, const char* key, double neutral) {
  const double v = f.Number(key, neutral, -1e9, 1e9);
  if (f.status().ok() && v != neutral)
    return Status::Errorf("'{}' = {} is not supported yet (only {}, which disables it)", key, v,
                          neutral);
  return Status::Ok();
}

// Fields that would change the output and that lockstep does not implement: refused unless they
// ask for nothing, never silently ignored.
Status RefuseUnsupported(FieldReader& f, const nlohmann::json& body) {
  for (const char* key : {"logit_bias", "grammar", "json_schema", "suffix"}) {
    const auto it = body.find(key);
    if (it != body.end() && !it->is_null() && !it->empty() && *it != "")
      return Status::Errorf("'{}' is not supported", key);
  }
  if (const auto rf = body.find("response_format");
      rf != body.end() && rf->is_object() && rf->value("type", "text") != "text")
    return Status::Error("'response_format' other than {\"type\": \"text\"} is not supported");
  if (f.Bool("echo", false)) return Status::Error("'echo' is not supported");
  f.Integer("best_of", 1, 1, 1);  // one candidate per request, as n
  return f.status();
}

void ReadStop(FieldReader& f, const nlohmann::json& body, int max_stop, CompletionParams* p) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return;
  if (it->is_string()) {
    p->stop.push_back(it->get<std::string>());
  } else if (it->is_array() && it->size() <= static_cast<size_t>(max_stop)) {
    for (const auto& s : *it) {
      if (!s.is_string()) return f.Fail(Status::Error("'stop' must hold strings only"));
      p->stop.push_back(s.get<std::string>());
    }
  } else {
    f.Fail(Status::Errorf("'stop' must be a string or an array of at most {} strings", max_stop));
  }
}

uint64_t SeedFor(int64_t requested) {
  if (requested >= 0) return static_cast<uint64_t>(requested);
  std::random_device rd;
  return ((static_cast<uint64_t>(rd()) << 32) | rd()) >> 1;
}

void ReadLogprobs(FieldReader& f, Api api, CompletionParams* p) {
  constexpr int kMaxTop = 20;
  if (api == Api::kLlama) {
    const int n = static_cast<int>(f.Integer("n_probs", 0, 0, kMaxTop));
    p->n_probs = n > 0 ? n : -1;
  } else if (api == Api::kCompletions) {
    if (f.Has("logprobs")) p->n_probs = static_cast<int>(f.Integer("logprobs", 0, 0, kMaxTop));
  } else if (f.Bool("logprobs", false)) {
    p->n_probs = static_cast<int>(f.Integer("top_logprobs", 0, 0, kMaxTop));
  } else if (f.Has("top_logprobs")) {
    f.Fail(Status::Error("'top_logprobs' needs 'logprobs': true"));
  }
}

}  // namespace

nlohmann::json CompletionParams::Settings() const {
  return {{"n_predict", n_predict},
          {"temperature", sampling.temperature},
          {"top_k", sampling.top_k},
          {"top_p", sampling.top_p},
          {"min_p", sampling.min_p},
          {"repeat_penalty", sampling.repeat_penalty},
          {"repeat_last_n", sampling.repeat_last_n},
          {"seed", sampling.seed},
          {"stop", stop},
          {"ignore_eos", ignore_eos},
          {"n_probs", n_probs},
          {"draft_max", draft_max},
          {"draft_p_min", draft_p_min}};
}

bool FieldReader::Has(const char* key) const {
  const auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

const nlohmann::json* FieldReader::Get(const char* key) {
  if (!status_.ok()) return nullptr;
  const auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

void FieldReader::Fail(Status s) {
  if (status_.ok()) status_ = std::move(s);
}

double FieldReader::Number(const char* key, double fallback, double lo, double hi) {
  const nlohmann::json* v = Get(key);
  if (!v) return fallback;
  if (!v->is_number()) {
    Fail(Status::Errorf("'{}' must be a number, not {}", key, TypeName(*v)));
    return fallback;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    Fail(Status::Errorf("'{}' = {} is outside [{}, {}]", key, v->dump(), lo, hi));
    return fallback;
  }
  return d;
}

int64_t FieldReader::Integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  const nlohmann::json* v = Get(key);
  if (!v) return fallback;
  const bool integral = v->is_number_integer() ||
                        (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>());
  if (!integral) {
    Fail(Status::Errorf("'{}' must be an integer, not {}", key,
                        v->is_number() ? v->dump() : TypeName(*v)));
    return fallback;
  }
  // Unsigned values above INT64_MAX and floats beyond the range are out of range, not wrapped.
  const bool fits = v->is_number_unsigned()
                        ? v->get<uint64_t>() <= static_cast<uint64_t>(hi)
                        : (v->is_number_integer() || std::fabs(v->get<double>()) < 9.2e18);
  const int64_t n =
      fits ? (v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>())
           : hi;
  if (!fits || n < lo || n > hi) {
    Fail(Status::Errorf("'{}' = {} is outside [{}, {}]", key, v->dump(), lo, hi));
    return fallback;
  }
  return n;
}

bool FieldReader::Bool(const char* key, bool fallback) {
  const nlohmann::json* v = Get(key);
  if (!v) return fallback;
  if (!v->is_boolean()) {
    Fail(Status::Errorf("'{}' must be a boolean, not {}", key, TypeName(*v)));
    return fallback;
  }
  return v->get<bool>();
}

std::string FieldReader::String(const char* key, const std::string& fallback) {
  const nlohmann::json* v = Get(key);
  if (!v) return fallback;
  if (!v->is_string()) {
    Fail(Status::Errorf("'{}' must be a string, not {}", key, TypeName(*v)));
    return fallback;
  }
  return v->get<std::string>();
}

Expected<CompletionParams> ParseCompletion(const nlohmann::json& body, Api api,
                                           const RequestDefaults& d) {
  if (!body.is_object()) return Status::Error("the request body must be a JSON object");
  FieldReader f(body);
  CompletionParams p;
  constexpr int64_t kMaxTokens = 1 << 24;
  // Each API's own length field first; the other's is accepted too, as llama-server does.
  const char* openai_key =
      api == Api::kChat && f.Has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const char* length_key =
      api == Api::kLlama ? (f.Has("n_predict") || !f.Has("max_tokens") ? "n_predict" : "max_tokens")
                         : (f.Has(openai_key) || !f.Has("n_predict") ? openai_key : "n_predict");
  // n_predict's -1 means "until the context is full"; OpenAI's fields start at 0.
  const bool llama_key = std::string_view(length_key) == "n_predict";
  p.n_predict = static_cast<int>(f.Integer(length_key, -1, llama_key ? -1 : 0, kMaxTokens));
  p.sampling.temperature = static_cast<float>(f.Number("temperature", d.temperature, 0, 100));
  p.sampling.top_k = static_cast<int>(f.Integer("top_k", d.top_k, 0, 1 << 30));
  p.sampling.seed = SeedFor(f.Integer("seed", d.seed, -1, std::numeric_limits<int64_t>::max()));
  // The sampler's filters and penalty (each a function of the row: they keep the contract).
  p.sampling.top_p = static_cast<float>(f.Number("top_p", 1.0, 0, 1));
  p.sampling.min_p = static_cast<float>(f.Number("min_p", 0.0, 0, 1));
  p.sampling.repeat_penalty = static_cast<float>(f.Number("repeat_penalty", 1.0, 0.01, 100));
  p.sampling.repeat_last_n = static_cast<int>(f.Integer("repeat_last_n", 64, 0, 1 << 20));
  for (auto [key, neutral] : {std::pair{"typical_p", 1.0},
                              {"presence_penalty", 0.0},
                              {"frequency_penalty", 0.0}}) {
    if (Status s = CheckNeutral(f, key, neutral); !s.ok()) return s;
  }
  f.Integer("n", 1, 1, 1);  // one choice per request
  if (Status s = RefuseUnsupported(f, body); !s.ok()) return s;
  ReadStop(f, body, d.max_stop_strings, &p);
  p.ignore_eos = f.Bool("ignore_eos", false);
  ReadLogprobs(f, api, &p);
  p.stream = f.Bool("stream", false);
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Status::Error("'stream_options' must be an object");
    FieldReader so(*it);
    p.include_usage = so.Bool("include_usage", false);
    if (!so.status().ok()) return so.status().WithContext("stream_options");
  }
  p.return_tokens = f.Bool("return_tokens", false);
  p.draft_rounds = f.Bool("draft_rounds", false);
  f.Bool("cache_prompt", true);  // prefix sharing never changes a token: always on
  p.draft_max = static_cast<int>(f.Integer("speculative.n_max", d.draft_max, 0, d.draft_max));
  p.draft_p_min = static_cast<float>(f.Number("speculative.p_min", d.draft_p_min, 0, 1));
  if (!f.status().ok()) return f.status();
  return p;
}

Expected<std::vector<int32_t>> ParseTokenIds(const nlohmann::json& ids, int32_t n_vocab,
                                             const char* field) {
  if (!ids.is_array()) return Status::Errorf("'{}' must be an array of token ids", field);
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const auto& v : ids) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab ||
        (v.is_number_unsigned() && v.get<uint64_t>() >= static_cast<uint64_t>(n_vocab)))
      return Status::Errorf("'{}': {} is not a token id in [0, {})", field, v.dump(), n_vocab);
    out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return out;
}

Expected<std::vector<int32_t>> ParsePrompt(const nlohmann::json& prompt,
                                           const tokenizer::Tokenizer* tok, int32_t n_vocab) {
  const nlohmann::json* p = &prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  std::vector<int32_t> ids;
  if (p->is_string()) {
    if (!tok) return Status::Error("the model has no tokenizer: give the prompt as token ids");
    ids = tok->Encode(p->get<std::string>());
  } else if (p->is_array()) {
    if (!p->empty() && ((*p)[0].is_string() || (*p)[0].is_array()))
      return Status::Error("'prompt': one prompt per request (n = 1)");
    LS_ASSIGN_OR_RETURN(ids, ParseTokenIds(*p, n_vocab, "prompt"));
  } else {
    return Status::Errorf("'prompt' must be a string or an array of token ids, not {}",
                          TypeName(*p));
  }
  if (ids.empty()) return Status::Error("'prompt' has no tokens");
  return ids;
}

Status CheckMessages(const nlohmann::json& messages) {
  if (!messages.is_array() || messages.empty())
    return Status::Error("'messages' must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object()) return Status::Errorf("messages[{}] must be an object", i);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return Status::Errorf("messages[{}].role must be a string", i);
    const auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array())
      return Status::Errorf("messages[{}].content must be a string or an array of parts", i);
    if (content != m.end() && content->is_array())
      for (const auto& part : *content)
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          return Status::Errorf("messages[{}].content parts must be objects with a type", i);
  }
  return Status::Ok();
}

}  // namespace lockstep::server

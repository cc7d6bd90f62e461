// Single-sequence generation through the engine.
#include "engine/generate.h"

#include <algorithm>

namespace lockstep::engine {

Options SingleSequenceOptions(std::span<const int32_t> prompt, const GenerateOptions& opt,
                              bool speculative) {
  Options o;
  o.n_seq_max = 1;
  o.n_ctx =
      opt.n_ctx > 0 ? opt.n_ctx : static_cast<int>(prompt.size()) + std::max(0, opt.n_predict);
  o.n_ctx = std::max(o.n_ctx, 2);
  o.prefill_chunk = std::max(1, opt.prefill_chunk);
  o.draft_max = speculative ? std::max(0, opt.draft_max) : 0;
  o.cache_type_k = opt.cache_type_k;
  o.cache_type_v = opt.cache_type_v;
  return o;
}

Request ToRequest(std::span<const int32_t> prompt, const GenerateOptions& opt, bool speculative) {
  Request r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.n_predict = opt.n_predict;
  r.sampling = opt.sampling;
  r.stop_tokens = opt.stop_tokens;
  r.draft_max = speculative ? opt.draft_max : 0;
  r.draft_p_min = opt.draft_p_min;
  r.adaptive_draft = opt.adaptive_draft;
  return r;
}

Expected<GenerateResult> Generate(const model::Model& target, speculative::Proposer* proposer,
                                  std::span<const int32_t> prompt, const GenerateOptions& opt) {
  if (prompt.empty()) return Status::Error("generate: the prompt has no tokens");
  if (opt.draft_max < 0) return Status::Errorf("generate: draft_max {} < 0", opt.draft_max);
  const bool spec = proposer != nullptr && opt.draft_max > 0;
  LS_ASSIGN_OR_RETURN(auto engine, Engine::Create(target, spec ? proposer : nullptr,
                                                  SingleSequenceOptions(prompt, opt, spec)));
  std::vector<Request> one;
  one.push_back(ToRequest(prompt, opt, spec));
  LS_ASSIGN_OR_RETURN(auto results, RunAll(*engine, std::move(one)));
  GenerateResult res;
  res.tokens = std::move(results[0].tokens);
  res.prompt_ms = results[0].prompt_ms;
  res.generate_ms = results[0].generate_ms;
  res.draft = std::move(results[0].draft);
  return res;
}

Status TeacherForce(const model::Model& model, std::span<const int32_t> tokens, int first,
                    int chunk, const ScoreSink& sink) {
  const int n = static_cast<int>(tokens.size());
  if (n < 2 || first < 1 || first >= n)
    return Status::Errorf("teacher forcing: {} tokens, first scored position {}", n, first);
  Request r;
  r.prompt.assign(tokens.begin(), tokens.end() - 1);
  r.n_predict = 0;
  r.logits_from = first;
  Options o;
  o.n_ctx = std::max(2, n);
  o.prefill_chunk = std::max(1, chunk);
  o.max_logit_rows = o.prefill_chunk;
  LS_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, nullptr, o));
  engine->set_logits_sink(
      [&sink](SeqId, int32_t pos, std::span<const float> logits) { sink(pos, logits); });
  std::vector<Request> one;
  one.push_back(std::move(r));
  return RunAll(*engine, std::move(one)).status();
}

Expected<GenerateResult> GenerateSpeculative(const model::Model& target, const model::Model& draft,
                                             std::span<const int32_t> prompt,
                                             const GenerateOptions& opt) {
  LS_ASSIGN_OR_RETURN(auto assistant, model::Assistant::Pair(target, draft));
  speculative::AssistantProposer proposer(*assistant, 1);
  return Generate(target, &proposer, prompt, opt);
}

}  // namespace lockstep::engine

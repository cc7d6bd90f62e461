// Plain generation (the reference loop): chunked prefill, then single-row decode steps.
#include "spec/generate.h"

#include <algorithm>

#include "spec/loop_common.h"

namespace lockstep::spec {

Expected<int> ContextSize(std::span<const int32_t> prompt, const GenerateOptions& opt) {
  if (prompt.empty()) return Status::Error("generate: the prompt has no tokens");
  const int n_prompt = static_cast<int>(prompt.size());
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : n_prompt + opt.n_predict + 1;
  if (n_prompt + opt.n_predict > n_ctx)
    return Status::Errorf("generate: prompt ({}) + n_predict ({}) exceeds the context ({})",
                          n_prompt, opt.n_predict, n_ctx);
  return n_ctx;
}

Status Prefill(const model::Model& target, std::span<const int32_t> prompt,
               const GenerateOptions& opt, bool want_hidden, kv::KvCache& kv,
               model::ForwardResult* out) {
  const int n_prompt = static_cast<int>(prompt.size());
  const int chunk = std::max(1, opt.prefill_chunk);
  model::Batch batch;
  for (int start = 0; start < n_prompt; start += chunk) {
    batch.Clear();
    const int end = std::min(n_prompt, start + chunk);
    for (int p = start; p < end; ++p) batch.Add(prompt[p], p, 0, p == n_prompt - 1);
    LS_RETURN_IF_ERROR(target.Forward(batch, kv, out, {.want_hidden = want_hidden}));
  }
  return Status::Ok();
}

bool Emit(const GenerateOptions& opt, int32_t tok, GenerateResult* res) {
  res->tokens.push_back(tok);
  if (std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end())
    return true;
  return static_cast<int>(res->tokens.size()) >= opt.n_predict;
}

Expected<GenerateResult> GeneratePlain(const model::Model& target, std::span<const int32_t> prompt,
                                       const GenerateOptions& opt) {
  LS_ASSIGN_OR_RETURN(const int n_ctx, ContextSize(prompt, opt));
  LS_ASSIGN_OR_RETURN(auto kv, target.NewKv(1, n_ctx, std::max(1, opt.prefill_chunk)));
  GenerateResult res;
  model::ForwardResult out;
  auto t0 = std::chrono::steady_clock::now();
  LS_RETURN_IF_ERROR(Prefill(target, prompt, opt, false, *kv, &out));
  res.prompt_ms = MsSince(t0);
  t0 = std::chrono::steady_clock::now();
  int pos = static_cast<int>(prompt.size());  // position of the token being chosen
  model::Batch batch;
  while (opt.n_predict > 0) {
    const std::span<const float> logits(out.logits_row(0), static_cast<size_t>(out.n_vocab));
    const int32_t tok = sample::Select(opt.sampling, pos, logits);
    if (Emit(opt, tok, &res)) break;
    batch.Clear();
    batch.Add(tok, pos, 0, true);
    LS_RETURN_IF_ERROR(target.Forward(batch, *kv, &out));
    ++pos;
  }
  res.generate_ms = MsSince(t0);
  return res;
}

}  // namespace lockstep::spec

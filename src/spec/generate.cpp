// Plain generation: chunked prefill, then single-row decode steps.
#include "spec/generate.h"

#include <algorithm>
#include <chrono>

namespace lockstep::spec {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<GenerateResult> GeneratePlain(const model::Model& target,
                                       std::span<const int32_t> prompt,
                                       const GenerateOptions& opt) {
  if (prompt.empty()) return Status::Error("generate: the prompt has no tokens");
  const int n_prompt = static_cast<int>(prompt.size());
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : n_prompt + opt.n_predict + 1;
  if (n_prompt + opt.n_predict > n_ctx)
    return Status::Errorf("generate: prompt ({}) + n_predict ({}) exceeds the context ({})",
                          n_prompt, opt.n_predict, n_ctx);
  auto kv = target.NewKv(1, n_ctx);
  GenerateResult res;
  model::ForwardResult out;
  model::Batch batch;
  auto t0 = std::chrono::steady_clock::now();
  const int chunk = std::max(1, opt.prefill_chunk);
  for (int start = 0; start < n_prompt; start += chunk) {
    batch.Clear();
    const int end = std::min(n_prompt, start + chunk);
    for (int p = start; p < end; ++p) batch.Add(prompt[p], p, 0, p == n_prompt - 1);
    LS_RETURN_IF_ERROR(target.Forward(batch, *kv, &out));
  }
  res.prompt_ms = MsSince(t0);
  t0 = std::chrono::steady_clock::now();
  int pos = n_prompt;  // position of the token being chosen
  std::span<const float> logits(out.logits_row(0), static_cast<size_t>(out.n_vocab));
  while (static_cast<int>(res.tokens.size()) < opt.n_predict) {
    const int32_t tok = sample::Select(opt.sampling, pos, logits);
    res.tokens.push_back(tok);
    if (std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end())
      break;
    if (static_cast<int>(res.tokens.size()) == opt.n_predict) break;
    batch.Clear();
    batch.Add(tok, pos, 0, true);
    LS_RETURN_IF_ERROR(target.Forward(batch, *kv, &out));
    logits = std::span<const float>(out.logits_row(0), static_cast<size_t>(out.n_vocab));
    ++pos;
  }
  res.generate_ms = MsSince(t0);
  return res;
}

}  // namespace lockstep::spec

// Shared options and model loading for `generate` and `chat`.
#include "cli/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/load.h"
#include "cli/prompt_text.h"
#include "kv/kv_cache.h"

namespace lockstep::cli {

void AddRunOptions(CLI::App& app, RunArgs& a) {
  a.threads = PhysicalCores();
  app.option_defaults()->always_capture_default();
  app.add_option("-m,--model", a.model,
                 "target model GGUF (default: models/lockstep-code-target.gguf)");
  app.add_option("-n,--n-predict", a.n_predict, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--temp", a.temp, "temperature (0 = greedy)")
      ->check(FiniteNumber() & CLI::Range(0.0f, 100.0f));
  app.add_option("-s,--seed", a.seed,
                 "sampling seed (each token depends on seed and position only); -1: random, "
                 "printed")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  app.add_option("--top-k", a.top_k, "sample among the k best tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", a.top_p,
                 "sample among the best tokens holding this probability (1 = all)")
      ->check(FiniteNumber() & CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", a.min_p,
                 "drop tokens below this fraction of the best one's probability")
      ->check(FiniteNumber() & CLI::Range(0.0f, 1.0f));
  app.add_option("--repeat-penalty", a.repeat_penalty,
                 "divide positive logits (multiply negative) of recently seen tokens (1 = off)")
      ->check(FiniteNumber() & CLI::Range(0.0f, 100.0f));
  app.add_option("--repeat-last-n", a.repeat_last_n, "tokens the repeat penalty looks back at")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-t,--threads", a.threads, "CPU threads (never changes the output)")
      ->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx,--ctx-size", a.ctx, "context size (0: prompt + n + draft room)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ubatch-size", a.ubatch,
                 "prompt tokens per forward pass (also -ub; never changes the output)")
      ->check(CLI::Range(1, 8192));
  a.draft_option = app.add_option("--draft,--model-draft", a.draft,
                                  "Gemma 4 assistant drafter GGUF: speculative decoding (also "
                                  "-md); without a path, the default drafter (found like -m's)")
                       ->expected(0, 1);
  app.add_option("--draft-max,--spec-draft-n-max", a.draft_max, "tokens drafted per round")
      ->check(CLI::Range(1, 32));
  app.add_option("--draft-p-min", a.draft_p_min, "stop drafting below this draft probability")
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_flag("--fixed-draft", a.fixed_draft,
               "always draft --draft-max tokens (default: adapt K to acceptance; never changes "
               "the output)");
  app.add_option("--cache-type-k", a.cache_type_k, "KV cache type for K: f32, f16, bf16 (-ctk)")
      ->check(CacheTypeName());
  app.add_option("--cache-type-v", a.cache_type_v, "KV cache type for V: f32, f16, bf16 (-ctv)")
      ->check(CacheTypeName());
  app.add_option("--device", a.device,
                 "backend: auto (cuda when a GPU is present, else cpu), cpu or cuda");
  app.add_option("--gpu-layers,--n-gpu-layers", a.gpu_layers,
                 "accepted for llama.cpp command lines (also -ngl); every layer runs on --device");
  app.add_option("--chat-template-file", a.chat_template_file,
                 "Jinja chat template to use instead of the model's");
  app.add_flag("--ignore-eos", a.ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--no-hash", a.no_hash,
               "do not hash the model files for the identity block (hashes are cached by file "
               "identity and modification time otherwise)");
}

namespace {

Status SetOptions(const RunArgs& a, const tokenizer::Tokenizer* tok, engine::GenerateOptions& o) {
  o.n_predict = a.n_predict;
  o.sampling.temperature = a.temp;
  o.sampling.seed = static_cast<uint64_t>(a.seed);
  o.sampling.top_k = a.top_k;
  o.sampling.top_p = a.top_p;
  o.sampling.min_p = a.min_p;
  o.sampling.repeat_penalty = a.repeat_penalty;
  o.sampling.repeat_last_n = a.repeat_last_n;
  o.n_ctx = a.ctx;
  o.prefill_chunk = a.ubatch;
  o.draft_max = a.draft_max;
  o.draft_p_min = a.draft_p_min;
  o.adaptive_draft = !a.fixed_draft;
  if (tok && !a.ignore_eos) o.stop_tokens = tok->eog_ids();
  for (auto [flag, name, type] : {std::tuple{"--cache-type-k", &a.cache_type_k, &o.cache_type_k},
                                  std::tuple{"--cache-type-v", &a.cache_type_v, &o.cache_type_v}}) {
    auto t = kv::ParseCacheType(*name);
    if (!t.ok()) return Status::Errorf("{}: {}", flag, t.status().message());
    *type = *t;
  }
  return Status::Ok();
}

}  // namespace

Expected<LoadedRun> LoadRun(RunArgs& a, int max_seqs) {
  if (a.draft.empty() && a.draft_option != nullptr && a.draft_option->count() > 0)
    a.draft = DefaultModelPath("assistant");
  a.seed = static_cast<int64_t>(ResolveSeed(a.seed));
  LS_ASSIGN_OR_RETURN(LoadedModels m,
                      LoadModels({a.model, a.draft, a.device, a.threads, a.gpu_layers, max_seqs}));
  a.device = m.backend->name();  // "auto" resolved
  LoadedRun r;
  r.backend = std::move(m.backend);
  r.model_path = std::move(m.model_path);
  r.target = std::move(m.target);
  r.tok = std::move(m.tokenizer);
  r.draft = std::move(m.draft);
  r.assistant = std::move(m.assistant);
  r.proposer = std::move(m.proposer);
  LS_RETURN_IF_ERROR(SetOptions(a, r.tok.get(), r.options));
  WarnBeyondTrainedContext(a.ctx, r.target->config().n_ctx_train);
  return r;
}

Expected<std::string> ChatTemplateFor(const RunArgs& a, const tokenizer::Tokenizer* tok) {
  if (!a.chat_template_file.empty()) {
    std::ifstream in(a.chat_template_file, std::ios::binary);
    if (!in) return Status::Errorf("--chat-template-file {}: cannot open", a.chat_template_file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (!tok) return Status::Error("the model has no tokenizer, so no chat template");
  if (tok->chat_template().empty())
    return Status::Error("the model has no chat template; pass --chat-template-file FILE");
  return tok->chat_template();
}

}  // namespace lockstep::cli

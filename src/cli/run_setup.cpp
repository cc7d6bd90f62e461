// Shared options and model loading for `generate` and `chat`.
#include "cli/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/common.h"
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
  app.add_option("--cache-type-k", a.cache_type_k, "KV cache type for K: f32, f16, bf16");
  app.add_option("--cache-type-v", a.cache_type_v, "KV cache type for V: f32, f16, bf16");
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

std::vector<std::string> LlamaCppArgs(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& arg : args) {
    if (arg == "-md") arg = "--model-draft";
    if (arg == "-ngl") arg = "--n-gpu-layers";
    if (arg == "-cnv") arg = "--conversation";
    if (arg == "-sys") arg = "--system-prompt";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  return args;
}

int ParseOrExit(CLI::App& app, std::vector<std::string> reversed_args) {
  try {
    app.parse(reversed_args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // 2: a usage error, as every command
  }
  return -1;
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
  LoadedRun r;
  LS_ASSIGN_OR_RETURN(r.backend, CreateBackend(a.device, a.threads));
  a.device = r.backend->name();  // "auto" resolved
  if (a.gpu_layers >= 0 && a.device == "cpu")
    std::fprintf(stderr, "lockstep: -ngl %d ignored: running on the CPU (--device cpu)\n",
                 a.gpu_layers);
  a.seed = static_cast<int64_t>(ResolveSeed(a.seed));
  r.model_path = a.model.empty() ? DefaultModelPath("target") : a.model;
  LS_ASSIGN_OR_RETURN(r.target, model::Model::Load(r.model_path, *r.backend));
  LS_ASSIGN_OR_RETURN(r.tok, ModelTokenizer(*r.target));
  LS_RETURN_IF_ERROR(SetOptions(a, r.tok.get(), r.options));
  if (a.draft.empty() && a.draft_option != nullptr && a.draft_option->count() > 0)
    a.draft = DefaultModelPath("assistant");
  if (!a.draft.empty()) {
    LS_ASSIGN_OR_RETURN(r.draft, model::Model::Load(a.draft, *r.backend));
    LS_ASSIGN_OR_RETURN(r.assistant, model::Assistant::Pair(*r.target, *r.draft));
    r.proposer = std::make_unique<speculative::AssistantProposer>(*r.assistant, max_seqs);
  }
  const int n_train = r.target->config().n_ctx_train;
  if (a.ctx > n_train)
    std::fprintf(stderr, "lockstep: warning: context %d is beyond the model's trained %d\n", a.ctx,
                 n_train);
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

// `lockstep generate`: greedy or seeded sampling from a Gemma 4 GGUF, plain or speculative.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/load.h"
#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct Args {
  std::string model, prompt, tokens, draft, prompts_file, device = "auto";
  std::string cache_type_k = "f32", cache_type_v = "f32";
  int gpu_layers = -1;
  int n_predict = 64, threads = 2, ctx = 0, draft_max = 3, top_k = 0, parallel = 4;
  float temp = 0.0f, draft_p_min = 0.0f;
  int64_t seed = 0;
  bool no_hash = false;
  bool json = false, chat = false, ignore_eos = false, compare = false, fixed_draft = false;
};

void AddOptions(CLI::App& app, Args& a) {
  app.add_option("-m,--model", a.model, "target model GGUF (default: the embedded default model)");
  app.add_option("-p,--prompt", a.prompt, "prompt text (needs a tokenizer in the model)");
  app.add_option("--tokens", a.tokens, "prompt as comma-separated token ids");
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
  app.add_option("-t,--threads", a.threads, "CPU threads (never changes the output)")
      ->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx,--ctx-size", a.ctx, "context size (default: prompt + n + draft room)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft,--model-draft", a.draft,
                 "Gemma 4 assistant drafter GGUF: speculative decoding (also -md)");
  app.add_option("--draft-max,--spec-draft-n-max", a.draft_max, "tokens drafted per round")
      ->check(CLI::Range(1, 32));
  app.add_option("--draft-p-min", a.draft_p_min, "stop drafting below this draft probability")
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_flag(
      "--fixed-draft", a.fixed_draft,
      "always draft --draft-max tokens (default: adapt K to acceptance; never changes the output)");
  app.add_option("--prompts-file", a.prompts_file,
                 "several prompts, one per line (a JSON string of text, or a JSON array of ids); "
                 "prints one JSON line per prompt");
  app.add_option("--parallel", a.parallel, "with --prompts-file: sequences decoded together")
      ->check(CLI::Range(1, 256));
  app.add_option("--cache-type-k", a.cache_type_k, "KV cache type for K: f32, f16, bf16");
  app.add_option("--cache-type-v", a.cache_type_v, "KV cache type for V: f32, f16, bf16");
  app.add_option("--device", a.device, "backend: auto (cuda when a GPU is present, else cpu), cpu or cuda");
  app.add_option("--gpu-layers,--n-gpu-layers", a.gpu_layers,
                 "accepted for llama.cpp command lines (also -ngl); every layer runs on --device");
  app.add_flag("--chat", a.chat, "wrap the prompt as a user turn with the model's chat template");
  app.add_flag("--ignore-eos", a.ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--compare", a.compare,
               "with --draft: also run plain decoding and report both speeds");
  app.add_flag("--json", a.json, "print one JSON object instead of text");
  app.add_flag("--no-hash", a.no_hash,
               "do not hash the model files for the identity block (hashes are cached by file "
               "identity and modification time otherwise)");
}

Expected<std::vector<int32_t>> PromptTokens(const Args& a, const tokenizer::Tokenizer* tok) {
  if (!a.tokens.empty()) return ParseIdList(a.tokens, "--tokens");
  if (a.prompt.empty()) return Status::Error("give a prompt with -p TEXT or --tokens 1,2,3");
  if (!tok) return Status::Error("the model has no tokenizer; use --tokens");
  if (!a.chat) return tok->Encode(a.prompt);
  if (tok->chat_template().empty()) return Status::Error("--chat: the model has no chat template");
  nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", a.prompt}}});
  tokenizer::ChatOptions copt;
  if (tok->bos_id() >= 0) copt.bos_token = tok->token_text(tok->bos_id());
  LS_ASSIGN_OR_RETURN(std::string text, tokenizer::RenderChat(tok->chat_template(), msgs, copt));
  return tok->Encode(text, false, true);  // the template carries <bos> itself
}

// Prompts from --prompts-file: one JSON string (text) or JSON array (ids) per non-empty line.
Expected<std::vector<std::vector<int32_t>>> PromptsFromFile(const Args& a,
                                                            const tokenizer::Tokenizer* tok) {
  std::ifstream in(a.prompts_file);
  if (!in) return Status::Errorf("{}: cannot open", a.prompts_file);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = fmt::format("{}:{}", a.prompts_file, n);
    if (j.is_string()) {
      if (!tok) return Status::Errorf("{}: text prompt, but the model has no tokenizer", where);
      Args one = a;
      one.prompt = j.get<std::string>();
      one.tokens.clear();
      LS_ASSIGN_OR_RETURN(auto ids, PromptTokens(one, tok));
      prompts.push_back(std::move(ids));
    } else if (j.is_array()) {
      LS_ASSIGN_OR_RETURN(auto ids, ParseIdList(line, where));
      prompts.push_back(std::move(ids));
    } else {
      return Status::Errorf("{}: expected a JSON string or an array of token ids", where);
    }
  }
  if (prompts.empty()) return Status::Errorf("{}: no prompts", a.prompts_file);
  return prompts;
}

engine::GenerateOptions Options(const Args& a, const tokenizer::Tokenizer* tok) {
  engine::GenerateOptions opt;
  opt.n_predict = a.n_predict;
  opt.sampling = {a.temp, static_cast<uint64_t>(a.seed), a.top_k};
  opt.n_ctx = a.ctx;
  opt.draft_max = a.draft_max;
  opt.draft_p_min = a.draft_p_min;
  opt.adaptive_draft = !a.fixed_draft;
  if (tok && !a.ignore_eos) opt.stop_tokens = tok->eog_ids();
  return opt;
}

nlohmann::json Settings(const Args& a) {
  return {{"n_predict", a.n_predict},
          {"temp", a.temp},
          {"seed", a.seed},
          {"top_k", a.top_k},
          {"ctx", a.ctx},
          {"chat", a.chat},
          {"draft_max", a.draft_max},
          {"draft_p_min", a.draft_p_min},
          {"adaptive_draft", !a.fixed_draft},
          {"ignore_eos", a.ignore_eos},
          {"cache_type_k", a.cache_type_k},
          {"cache_type_v", a.cache_type_v}};
}

// --prompts-file: every prompt through one engine, --parallel sequences at a time.
int RunMany(const Args& a, const model::Model& target, speculative::Proposer* proposer,
            const tokenizer::Tokenizer* tok, const RunRecord& rec,
            const engine::GenerateOptions& opt) {
  auto prompts = PromptsFromFile(a, tok);
  if (!prompts.ok()) return Fail(prompts.status());
  size_t longest = 0;
  for (const auto& p : *prompts) longest = std::max(longest, p.size());
  engine::Options eo = engine::SingleSequenceOptions(
      std::span<const int32_t>((*prompts)[0].data(), longest), opt, proposer != nullptr);
  eo.n_seq_max = std::min<int>(a.parallel, static_cast<int>(prompts->size()));
  eo.cache_type_k = opt.cache_type_k;
  eo.cache_type_v = opt.cache_type_v;
  auto eng = engine::Engine::Create(target, proposer, eo);
  if (!eng.ok()) return Fail(eng.status());
  std::vector<engine::Request> reqs;
  for (const auto& p : *prompts) reqs.push_back(engine::ToRequest(p, opt, proposer != nullptr));
  auto results = engine::RunAll(**eng, std::move(reqs));
  if (!results.ok()) return Fail(results.status());
  for (size_t i = 0; i < results->size(); ++i) {
    const engine::SeqResult& r = (*results)[i];
    engine::GenerateResult g{r.tokens, r.prompt_ms, r.generate_ms, r.draft};
    const std::string text = tok ? tok->Decode(r.tokens) : std::string();
    nlohmann::json j = GenerateJson(rec, Settings(a), (*prompts)[i], g, text, a.json);
    j["index"] = i;
    std::printf("%s\n", DumpJson(j).c_str());
  }
  return 0;
}

int Run(Args a) {
  a.seed = static_cast<int64_t>(ResolveSeed(a.seed));
  auto loaded = LoadModels({a.model, a.draft, a.device, a.threads, a.gpu_layers, a.parallel});
  if (!loaded.ok()) return Fail(loaded.status());
  LoadedModels& m = *loaded;
  const tokenizer::Tokenizer* tok = m.tokenizer.get();
  engine::GenerateOptions opt = Options(a, tok);
  for (auto [flag, name, type] :
       {std::tuple{"--cache-type-k", &a.cache_type_k, &opt.cache_type_k},
        std::tuple{"--cache-type-v", &a.cache_type_v, &opt.cache_type_v}}) {
    auto t = kv::ParseCacheType(*name);
    if (!t.ok()) return Fail(Status::Errorf("{}: {}", flag, t.status().message()));
    *type = *t;
  }
  speculative::Proposer* proposer = m.proposer.get();
  const int n_train = m.target->config().n_ctx_train;
  if (a.ctx > n_train)
    std::fprintf(stderr, "lockstep: warning: context %d is beyond the model's trained %d\n", a.ctx,
                 n_train);
  RunRecord rec{"generate",        m.model_path,         a.draft,
                m.backend->name(), m.backend->threads(), !a.no_hash};
  if (!a.prompts_file.empty()) return RunMany(a, *m.target, proposer, tok, rec, opt);

  auto prompt = PromptTokens(a, tok);
  if (!prompt.ok()) return Fail(prompt.status());
  auto res = engine::Generate(*m.target, proposer, *prompt, opt);
  if (!res.ok()) return Fail(res.status());
  std::optional<engine::GenerateResult> plain;
  if (proposer && a.compare) {
    auto p = engine::Generate(*m.target, nullptr, *prompt, opt);
    if (!p.ok()) return Fail(p.status());
    plain = std::move(*p);
  }
  const std::string text = tok ? tok->Decode(res->tokens) : std::string();
  nlohmann::json j = GenerateJson(rec, Settings(a), *prompt, *res, text, a.json);
  if (plain) j["plain"] = TimingsJson(*plain), j["plain_equal"] = plain->tokens == res->tokens;
  if (a.json) {
    std::printf("%s\n", DumpJson(j).c_str());
  } else {
    if (tok)
      std::printf("%s\n", text.c_str());
    else
      std::printf("%s\n", DumpJson(j["tokens"]).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", SummaryLine(j).c_str());
  }
  // --compare: exit 1 when speculative and plain outputs differ (diff's convention).
  if (plain && plain->tokens != res->tokens) {
    std::fprintf(stderr, "lockstep: speculative and plain outputs DIFFER\n");
    return 1;
  }
  return 0;
}

}  // namespace

int Generate(int argc, char** argv) {
  CLI::App app{
      "Generate tokens with a Gemma 4 model. Output is byte-identical across runs, "
      "thread counts and speculation settings.",
      "lockstep generate"};
  Args a;
  AddOptions(app, a);
  if (const int rc = ParseWithLlamaAliases(app, argc, argv); rc >= 0) return rc;
  return Run(a);
}

}  // namespace lockstep::cli

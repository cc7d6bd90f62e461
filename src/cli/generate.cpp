// `lockstep generate`: greedy or seeded sampling from a Gemma 4 GGUF, plain or speculative.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/common.h"
#include "cli/commands.h"
#include "model/model.h"
#include "spec/generate.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct Args {
  std::string model, prompt, tokens, draft;
  int n_predict = 64, threads = 2, ctx = 0, draft_max = 3, top_k = 0;
  float temp = 0.0f, draft_p_min = 0.0f;
  uint64_t seed = 0;
  bool json = false, chat = false, ignore_eos = false, compare = false;
};

void AddOptions(CLI::App& app, Args& a) {
  app.add_option("-m,--model", a.model, "target model GGUF (default: the embedded default model)");
  app.add_option("-p,--prompt", a.prompt, "prompt text (needs a tokenizer in the model)");
  app.add_option("--tokens", a.tokens, "prompt as comma-separated token ids");
  app.add_option("-n,--n-predict", a.n_predict, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  app.add_option("--temp", a.temp, "temperature (0 = greedy)")->check(CLI::Range(0.0f, 100.0f));
  app.add_option("--seed", a.seed, "sampling seed (each token depends on seed and position only)");
  app.add_option("--top-k", a.top_k, "sample among the k best tokens (0 = all)")->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", a.threads, "CPU threads (never changes the output)")->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx", a.ctx, "context size (default: prompt + n + draft room)")->check(CLI::NonNegativeNumber);
  app.add_option("--draft", a.draft, "Gemma 4 assistant drafter GGUF: speculative decoding");
  app.add_option("--draft-max", a.draft_max, "tokens drafted per round")->check(CLI::Range(1, 32));
  app.add_option("--draft-p-min", a.draft_p_min, "stop drafting below this draft probability")->check(CLI::Range(0.0f, 1.0f));
  app.add_flag("--chat", a.chat, "wrap the prompt as a user turn with the model's chat template");
  app.add_flag("--ignore-eos", a.ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--compare", a.compare, "with --draft: also run plain decoding and report both speeds");
  app.add_flag("--json", a.json, "print one JSON object instead of text");
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

int Run(const Args& a) {
  const std::string model_path = a.model.empty() ? DefaultModelPath("target") : a.model;
  backend::CpuBackend be(a.threads);
  auto target = model::Model::Load(model_path, be);
  if (!target.ok()) return Fail(target.status());
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (auto t = tokenizer::Tokenizer::FromGguf((*target)->file()); t.ok()) tok = std::move(*t);
  auto prompt = PromptTokens(a, tok.get());
  if (!prompt.ok()) return Fail(prompt.status());

  spec::GenerateOptions opt;
  opt.n_predict = a.n_predict;
  opt.sampling = {a.temp, a.seed, a.top_k};
  opt.n_ctx = a.ctx;
  opt.draft_max = a.draft_max;
  opt.draft_p_min = a.draft_p_min;
  if (tok && !a.ignore_eos) opt.stop_tokens = tok->eog_ids();

  std::unique_ptr<model::Model> draft;
  if (!a.draft.empty()) {
    auto d = model::Model::Load(a.draft, be);
    if (!d.ok()) return Fail(d.status());
    draft = std::move(*d);
  }
  RunRecord rec{"generate", model_path, a.draft, be.name(), be.threads()};
  auto res = draft ? spec::GenerateSpeculative(**target, *draft, *prompt, opt)
                   : spec::GeneratePlain(**target, *prompt, opt);
  if (!res.ok()) return Fail(res.status());
  std::optional<spec::GenerateResult> plain;
  if (draft && a.compare) {
    auto p = spec::GeneratePlain(**target, *prompt, opt);
    if (!p.ok()) return Fail(p.status());
    plain = std::move(*p);
  }
  const std::string text = tok ? tok->Decode(res->tokens) : std::string();
  nlohmann::json settings = {{"n_predict", a.n_predict}, {"temp", a.temp}, {"seed", a.seed},
                             {"top_k", a.top_k}, {"ctx", a.ctx}, {"chat", a.chat},
                             {"draft_max", a.draft_max}, {"draft_p_min", a.draft_p_min},
                             {"ignore_eos", a.ignore_eos}};
  nlohmann::json j = GenerateJson(rec, settings, *prompt, *res, text, a.json);
  if (plain) j["plain"] = TimingsJson(*plain), j["plain_equal"] = plain->tokens == res->tokens;
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (tok) std::printf("%s\n", text.c_str());
    else std::printf("%s\n", j["tokens"].dump().c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", SummaryLine(j).c_str());
  }
  return 0;
}

}  // namespace

int Generate(int argc, char** argv) {
  CLI::App app{"Generate tokens with a Gemma 4 model. Output is byte-identical across runs, "
               "thread counts and speculation settings.", "lockstep generate"};
  Args a;
  AddOptions(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return Run(a);
}

}  // namespace lockstep::cli

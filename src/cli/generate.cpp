// `lockstep generate`: greedy or seeded sampling from a Gemma 4 GGUF, plain or speculative; text
// streams to the terminal, --json prints one object, --prompts-file decodes many together.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/prompt_text.h"
#include "cli/run_setup.h"
#include "cli/stream.h"
#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct Args {
  RunArgs run;
  std::string prompt, prompt_file, tokens, prompts_file;
  int parallel = 4;
  bool json = false, chat = false, compare = false, no_display_prompt = false, no_escape = false;
};

void AddOptions(CLI::App& app, Args& a) {
  AddRunOptions(app, a.run);
  app.add_option("-p,--prompt", a.prompt, "prompt text ('-' reads stdin; needs a tokenizer)");
  app.add_option("-f,--file", a.prompt_file, "read the prompt text from a file");
  app.add_option("--tokens", a.tokens, "prompt as comma-separated token ids");
  app.add_flag("--no-escape", a.no_escape,
               "take \\n, \\t, ... in the prompt literally (default: processed like llama.cpp)");
  app.add_flag("--no-display-prompt", a.no_display_prompt,
               "do not echo the prompt before the output");
  app.add_option("--prompts-file", a.prompts_file,
                 "several prompts, one per line (a JSON string of text, or a JSON array of ids); "
                 "prints one JSON line per prompt");
  app.add_option("--parallel", a.parallel, "with --prompts-file: sequences decoded together")
      ->check(CLI::Range(1, 256));
  app.add_flag("--chat", a.chat, "wrap the prompt as a user turn with the model's chat template");
  app.add_flag("--compare", a.compare,
               "with --draft: also run plain decoding and report both speeds");
  app.add_flag("--json", a.json, "print one JSON object instead of text");
}

Expected<std::vector<int32_t>> PromptTokens(const Args& a, const tokenizer::Tokenizer* tok) {
  if (!a.tokens.empty()) return ParseIdList(a.tokens, "--tokens");
  if (a.prompt.empty())
    return Status::Error("give a prompt with -p TEXT, -f FILE or --tokens 1,2,3");
  if (!tok) return Status::Error("the model has no tokenizer; use --tokens");
  if (!a.chat) return tok->Encode(a.prompt);
  LS_ASSIGN_OR_RETURN(std::string tmpl, ChatTemplateFor(a.run, tok));
  nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", a.prompt}}});
  tokenizer::ChatOptions copt;
  if (tok->bos_id() >= 0) copt.bos_token = tok->token_text(tok->bos_id());
  LS_ASSIGN_OR_RETURN(std::string text, tokenizer::RenderChat(tmpl, msgs, copt));
  return tok->Encode(text, false, true);  // the template carries <bos> itself
}

// Prompts from --prompts-file; text lines go through -p's path (chat template included).
Expected<std::vector<std::vector<int32_t>>> PromptsFromFile(const Args& a,
                                                            const tokenizer::Tokenizer* tok) {
  return ReadPromptsFile(
      a.prompts_file,
      [&](const std::string& text, const std::string& where) -> Expected<std::vector<int32_t>> {
        if (!tok) return Status::Errorf("{}: text prompt, but the model has no tokenizer", where);
        Args one = a;
        one.prompt = text;
        one.tokens.clear();
        return PromptTokens(one, tok);
      });
}

nlohmann::json Settings(const Args& args) {
  const RunArgs& a = args.run;
  return {{"n_predict", a.n_predict},
          {"temp", a.temp},
          {"seed", a.seed},
          {"top_k", a.top_k},
          {"top_p", a.top_p},
          {"min_p", a.min_p},
          {"repeat_penalty", a.repeat_penalty},
          {"repeat_last_n", a.repeat_last_n},
          {"ctx", a.ctx},
          {"chat", args.chat},
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

// Text mode: the prompt echoed, then tokens streamed as they come; Ctrl-C stops and still
// prints the timings (exit 130).
int RunStreaming(const Args& a, LoadedRun& run, const RunRecord& rec,
                 const std::vector<int32_t>& prompt) {
  const tokenizer::Tokenizer* tok = run.tok.get();
  if (!a.no_display_prompt) {
    const std::string shown = !a.prompt.empty() ? a.prompt : tok ? tok->Decode(prompt) : "";
    std::fputs(shown.c_str(), stdout);
    std::fflush(stdout);
  }
  InterruptGuard guard;
  StreamOptions so;
  so.interrupt = guard.flag();
  auto res = GenerateStreaming(*run.target, run.proposer.get(), prompt, run.options, tok, so);
  if (!res.ok()) return Fail(res.status());
  std::fputs("\n", stdout);
  std::fflush(stdout);
  nlohmann::json j = GenerateJson(rec, Settings(a), prompt, res->result, res->text, false);
  int rc = res->interrupted ? 130 : 0;
  if (run.proposer && a.compare && !res->interrupted) {
    auto plain = engine::Generate(*run.target, nullptr, prompt, run.options);
    if (!plain.ok()) return Fail(plain.status());
    rc = CompareExitCode(res->result.tokens, plain->tokens);
    j["plain"] = TimingsJson(*plain), j["plain_equal"] = rc == 0;
  }
  if (res->interrupted) std::fprintf(stderr, "lockstep: interrupted\n");
  std::fprintf(stderr, "%s\n", SummaryLine(j).c_str());
  if (rc == 1) std::fprintf(stderr, "lockstep: speculative and plain outputs DIFFER\n");
  return rc;
}

int RunJson(const Args& a, LoadedRun& run, const RunRecord& rec,
            const std::vector<int32_t>& prompt) {
  auto res = engine::Generate(*run.target, run.proposer.get(), prompt, run.options);
  if (!res.ok()) return Fail(res.status());
  std::optional<engine::GenerateResult> plain;
  if (run.proposer && a.compare) {
    auto p = engine::Generate(*run.target, nullptr, prompt, run.options);
    if (!p.ok()) return Fail(p.status());
    plain = std::move(*p);
  }
  const std::string text = run.tok ? run.tok->Decode(res->tokens) : std::string();
  nlohmann::json j = GenerateJson(rec, Settings(a), prompt, *res, text, true);
  const int rc = plain ? CompareExitCode(res->tokens, plain->tokens) : 0;
  if (plain) j["plain"] = TimingsJson(*plain), j["plain_equal"] = rc == 0;
  std::printf("%s\n", DumpJson(j).c_str());
  return rc;
}

int Run(Args a) {
  if (!a.prompt.empty() && !a.prompt_file.empty()) {
    std::fprintf(stderr, "lockstep generate: give the prompt with -p or with -f, not both\n");
    return 2;
  }
  auto text = ReadPrompt(a.prompt, a.prompt_file);
  if (!text.ok()) return Fail(text.status());
  a.prompt = a.no_escape ? *text : ProcessEscapes(*text);
  auto loaded = LoadRun(a.run, a.parallel);
  if (!loaded.ok()) return Fail(loaded.status());
  LoadedRun& run = *loaded;
  RunRecord rec{"generate",
                run.model_path,
                a.run.draft,
                run.backend->name(),
                run.backend->threads(),
                !a.run.no_hash,
                run.backend->device_name()};
  if (!a.prompts_file.empty())
    return RunMany(a, *run.target, run.proposer.get(), run.tok.get(), rec, run.options);
  auto prompt = PromptTokens(a, run.tok.get());
  if (!prompt.ok()) return Fail(prompt.status());
  return a.json ? RunJson(a, run, rec, *prompt) : RunStreaming(a, run, rec, *prompt);
}

}  // namespace

int Generate(int argc, char** argv) {
  // -cnv / -i (llama.cpp's conversation and interactive modes) run `lockstep chat`.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-cnv" || arg == "--conversation" || arg == "-i" || arg == "--interactive") {
      std::vector<char*> rest(argv, argv + argc);
      rest.erase(rest.begin() + i);
      return Chat(static_cast<int>(rest.size()), rest.data());
    }
  }
  CLI::App app{
      "Generate tokens with a Gemma 4 model. Output is byte-identical across runs, "
      "thread counts and speculation settings. -cnv, -i, --conversation and --interactive (as "
      "in llama.cpp) run `lockstep chat` with the same options.",
      "lockstep generate"};
  Args a;
  AddOptions(app, a);
  const int rc = ParseWithLlamaAliases(app, argc, argv);
  return rc >= 0 ? rc : Run(a);
}

}  // namespace lockstep::cli

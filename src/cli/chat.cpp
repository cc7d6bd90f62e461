// `lockstep chat`: interactive multi-turn chat through the model's chat template, each reply
// streamed as it is generated; /exit, /reset, thinking shown or hidden, speculative with --draft.
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/run_setup.h"
#include "cli/stream.h"
#include "tokenizer/chat_template.h"

namespace lockstep::cli {
namespace {

struct ChatArgs {
  RunArgs run;
  std::string system;
  bool think = false, hide_thinking = false;
};

constexpr const char* kHelpText =
    "commands: /exit (or end of input) quits, /reset starts a new conversation, /help\n";

struct Conversation {
  const LoadedRun& run;
  const ChatArgs& args;
  std::string tmpl;
  nlohmann::json messages = nlohmann::json::array();

  void Reset() {
    messages = nlohmann::json::array();
    if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
  }

  Expected<std::vector<int32_t>> Prompt() const {
    tokenizer::ChatOptions o;
    o.add_generation_prompt = true;
    if (args.think) o.enable_thinking = true;
    if (run.tok->bos_id() >= 0) o.bos_token = run.tok->token_text(run.tok->bos_id());
    LS_ASSIGN_OR_RETURN(std::string text, tokenizer::RenderChat(tmpl, messages, o));
    return run.tok->Encode(text, false, true);  // the template carries <bos> itself
  }

  // One reply, streamed; Ctrl-C ends the reply (what was said so far stays in the history).
  Status Reply(const std::string& user) {
    messages.push_back({{"role", "user"}, {"content", user}});
    LS_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, Prompt());
    InterruptGuard guard;
    StreamOptions so;
    so.hide_thinking = args.hide_thinking;
    so.interrupt = guard.flag();
    LS_ASSIGN_OR_RETURN(StreamedRun r, GenerateStreaming(*run.target, run.proposer.get(), prompt,
                                                         run.options, run.tok.get(), so));
    std::fputs("\n", stdout);
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", run.tok->Decode(r.result.tokens)}});
    const double tps =
        r.result.generate_ms > 0
            ? 1000.0 * static_cast<double>(r.result.tokens.size()) / r.result.generate_ms
            : 0.0;
    std::fprintf(stderr, "lockstep: %zu prompt + %zu tokens, %.2f tokens/s%s\n", prompt.size(),
                 r.result.tokens.size(), tps, r.interrupted ? " (interrupted)" : "");
    if (run.proposer)
      std::fprintf(stderr, "lockstep: draft acceptance %.3f (%lld / %lld)\n", r.result.draft.rate(),
                   static_cast<long long>(r.result.draft.accepted),
                   static_cast<long long>(r.result.draft.drafted));
    return Status::Ok();
  }
};

int Loop(Conversation& c) {
  c.Reset();
  std::string line;
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/help") {
      std::fputs(kHelpText, stdout);
      continue;
    }
    if (line == "/reset") {
      c.Reset();
      std::fputs("(new conversation)\n", stdout);
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Status s = c.Reply(line);
    if (!s.ok()) return Fail(s);
  }
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

int Chat(int argc, char** argv) {
  CLI::App app{
      "Chat with a Gemma 4 model through its chat template. Type a message and press "
      "Enter; /reset starts over, /exit quits.",
      "lockstep chat"};
  ChatArgs a;
  a.run.n_predict = 512;
  AddRunOptions(app, a.run);
  app.add_option("-p,--prompt,--system-prompt", a.system,
                 "system prompt (as llama.cpp's -cnv -p; also -sys)");
  app.add_flag("--think", a.think, "let the model think first (enable_thinking in the template)");
  app.add_flag("--hide-thinking", a.hide_thinking,
               "do not print the model's thinking (<|channel>...<channel|>)");
  const int rc = ParseWithLlamaAliases(app, argc, argv);
  if (rc >= 0) return rc;
  auto loaded = LoadRun(a.run, 1);
  if (!loaded.ok()) return Fail(loaded.status());
  if (!loaded->tok) return Fail(Status::Error("chat: the model has no tokenizer"));
  auto tmpl = ChatTemplateFor(a.run, loaded->tok.get());
  if (!tmpl.ok()) return Fail(tmpl.status());
  const Status ok = tokenizer::CheckChatTemplate(*tmpl);
  if (!ok.ok()) return Fail(ok);
  Conversation c{*loaded, a, *tmpl};
  return Loop(c);
}

}  // namespace lockstep::cli

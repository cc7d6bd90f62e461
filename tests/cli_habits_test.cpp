// The CLI habits a llama.cpp user brings: streamed output that Ctrl-C stops with timings, the
// prompt echoed, prompts from -f FILE and stdin with escapes, defaults in --help, -t = cores,
// and `lockstep chat` (with generate's -cnv / -i) driven through stdin.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/prompt_text.h"
#include "cli/stream.h"
#include "gguf/gguf.h"
#include "testing/child.h"
#include "testing/run_cli.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::string Target() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-target.gguf";
}
std::string Drafter() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-assistant.gguf";
}
std::string Template() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/templates/gemma4.jinja";
}

std::string Scratch(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "lockstep-tests";
  fs::create_directories(dir);
  const fs::path path = dir / fmt::format("{}.{}", name, ::getpid());
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

#define REQUIRE_MODELS() \
  if (!fs::exists(Target()) || !fs::exists(Drafter())) GTEST_SKIP() << "no models/"

TEST(GenerateCli, StreamsTokensAsGeneratedAndCtrlCPrintsTimings) {
  REQUIRE_MODELS();
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  const pid_t pid = testing::Spawn({LOCKSTEP_BINARY, "generate", "-m", Target(), "-p",
                                    "def f(x):", "-n", "4000", "--ignore-eos"},
                                   out_pipe[1], /*merge_stderr=*/true);
  ASSERT_GE(pid, 0);
  close(out_pipe[1]);
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  bool running_with_text = false;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    if (!testing::ReadSome(out_pipe[0], &out, std::chrono::milliseconds(200))) continue;
    // Generated text is arriving while the process still runs: it streams.
    if (out.rfind("def f(x):", 0) == 0 && out.size() > 60 && waitpid(pid, nullptr, WNOHANG) == 0) {
      running_with_text = true;
      break;
    }
  }
  EXPECT_TRUE(running_with_text) << "no streamed text before exit: " << out;
  kill(pid, SIGINT);
  const auto t1 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t1 < std::chrono::seconds(60) &&
         testing::ReadSome(out_pipe[0], &out, std::chrono::seconds(5))) {
  }
  close(out_pipe[0]);
  const int status = testing::WaitOrKill(pid, std::chrono::seconds(30));
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_NE(out.find("lockstep: interrupted"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("4 prompt \\+ [0-9]+ generated tokens.*tokens/s")))
      << out;
}

TEST(GenerateCli, EchoesThePromptUnlessToldNot) {
  REQUIRE_MODELS();
  int rc = 0;
  const std::string base =
      fmt::format("{} generate -m {} -p 'def f(x):' -n 4", LOCKSTEP_BINARY, Target());
  const std::string shown = testing::RunShell(base + " 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0);
  const std::string hidden = testing::RunShell(base + " --no-display-prompt 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(shown, "def f(x):" + hidden) << shown;
  EXPECT_NE(hidden.rfind("def f(x):", 0), 0u);
}

nlohmann::json PromptJson(const std::string& cmd) {
  int rc = 0;
  const std::string out = testing::RunShell(cmd + " -n 1 --json --no-hash 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0) << cmd;
  const auto j = nlohmann::json::parse(out, nullptr, false);
  return j.is_object() ? j["prompt_tokens"] : nlohmann::json();
}

TEST(GenerateCli, PromptFromFileOrStdinWithLlamaCppEscapes) {
  REQUIRE_MODELS();
  const std::string bin = fmt::format("{} generate -m {}", LOCKSTEP_BINARY, Target());
  const std::string file = Scratch("prompt-file", "x = 1\n\ty = '2'");
  const auto escaped = PromptJson(bin + " -p 'x = 1\\n\\ty = \\x272\\x27'");
  ASSERT_TRUE(escaped.is_array());
  EXPECT_EQ(PromptJson(bin + " -f " + file), escaped);
  EXPECT_EQ(PromptJson("cat " + file + " | " + bin + " -p -"), escaped);
  // Negative control: --no-escape keeps the backslashes, so the prompt tokens differ.
  EXPECT_NE(PromptJson(bin + " --no-escape -p 'x = 1\\n\\ty = \\x272\\x27'"), escaped);
  EXPECT_EQ(lockstep::cli::ProcessEscapes("a\\qb\\\\n\\"), "a\\qb\\n\\");  // unknown kept
  int rc = 0;
  testing::RunCli(LOCKSTEP_BINARY, fmt::format("generate -m {} -p x -f {}", Target(), file), &rc);
  EXPECT_EQ(rc, 2);  // a usage error
  fs::remove(file);
}

TEST(GenerateCli, HelpShowsDefaultsAndThreadsArePhysicalCores) {
  int rc = 0;
  const std::string help = testing::RunCli(LOCKSTEP_BINARY, "generate --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(help.find("=64"), std::string::npos) << help;  // -n
  EXPECT_NE(help.find("--top-p"), std::string::npos);
  const int cores = cli::PhysicalCores();
  EXPECT_GE(cores, 1);
  EXPECT_TRUE(std::regex_search(
      help, std::regex(fmt::format("--threads INT:INT in \\[1 - 256\\]={}\\b", cores))))
      << help;
  const std::string chat = testing::RunCli(LOCKSTEP_BINARY, "chat --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(chat.find("=512"), std::string::npos) << chat;  // chat's longer replies
  // The lab, inspect and quantize show theirs too.
  for (const auto& [cmd, shown] : std::vector<std::pair<std::string, std::string>>{
           {"lab probe", "--n-predict INT:INT in [1 - 65536]=32"},
           {"lab probe", "--width INT:INT in [1 - 64]=8"},
           {"lab logprobs", "--top-k INT:INT in [1 - 100]=5"},
           {"inspect", "--max-items UINT=8"},
           {"quantize", "(default 1;"}}) {
    const std::string h = testing::RunCli(LOCKSTEP_BINARY, cmd + " --help", &rc);
    EXPECT_EQ(rc, 0) << cmd;
    EXPECT_NE(h.find(shown), std::string::npos) << cmd << ": " << h;
  }
}

// A context beyond the model's trained length runs, with a warning naming both lengths.
TEST(GenerateCli, ContextBeyondTheTrainedLengthWarnsAndRuns) {
  REQUIRE_MODELS();
  int rc = -1;
  const std::string out = testing::RunCli(
      LOCKSTEP_BINARY, fmt::format("generate -m {} -p x -n 2 -c 8192 --no-hash", Target()), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("context 8192 is beyond the model's trained 4096"), std::string::npos) << out;
  const std::string within = testing::RunCli(
      LOCKSTEP_BINARY, fmt::format("generate -m {} -p x -n 2 -c 4096 --no-hash", Target()), &rc);
  EXPECT_EQ(rc, 0) << within;
  EXPECT_EQ(within.find("beyond the model's trained"), std::string::npos) << within;  // control
}

std::string ChatCmd(const std::string& input, const std::string& extra) {
  return fmt::format("printf '{}' | {} chat -m {} --chat-template-file {} -n 12 {}", input,
                     LOCKSTEP_BINARY, Target(), Template(), extra);
}

// `generate` of 6 greedy tokens after 'def f(x):' on the target with extra `flags`, as JSON.
std::string GenerateSix(const std::string& flags, int* rc) {
  return testing::RunCli(
      LOCKSTEP_BINARY,
      fmt::format("generate -m {} -p 'def f(x):' -n 6 --temp 0 --json --no-hash {}", Target(),
                  flags),
      rc);
}

// llama.cpp's -ctk / -ctv name the KV cache types: the run records them and decodes as with the
// long flags; an unknown type is a usage error naming the value (exit 2).
TEST(GenerateCli, LlamaCppCacheTypeFlags) {
  REQUIRE_MODELS();
  int rc = -1;
  const std::string short_out = GenerateSix("-ctk f16 -ctv bf16", &rc);
  ASSERT_EQ(rc, 0) << short_out;
  const std::string long_out = GenerateSix("--cache-type-k f16 --cache-type-v bf16", &rc);
  ASSERT_EQ(rc, 0) << long_out;
  const auto a = nlohmann::json::parse(short_out.substr(short_out.find('{')));
  const auto b = nlohmann::json::parse(long_out.substr(long_out.find('{')));
  EXPECT_EQ(a["identity"]["settings"]["cache_type_k"], "f16");
  EXPECT_EQ(a["identity"]["settings"]["cache_type_v"], "bf16");
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["identity"]["settings"], b["identity"]["settings"]);
  const std::string bad = GenerateSix("-ctk q9", &rc);
  EXPECT_EQ(rc, 2) << bad;
  EXPECT_NE(bad.find("q9"), std::string::npos) << bad;
}

// llama.cpp's -ub sets the prompt rows per forward pass: any size decodes the same tokens (the
// run's prompt of 5 tokens goes through in 2-row, 1-row and whole passes); 0 is a usage error.
TEST(GenerateCli, UbatchSizeNeverChangesTheTokens) {
  REQUIRE_MODELS();
  int rc = -1;
  const std::string whole = GenerateSix("", &rc);
  ASSERT_EQ(rc, 0) << whole;
  const auto tokens = nlohmann::json::parse(whole.substr(whole.find('{')))["tokens"];
  for (const std::string flags : {"-ub 2", "--ubatch-size 1"}) {
    const std::string out = GenerateSix(flags, &rc);
    ASSERT_EQ(rc, 0) << flags << ": " << out;
    EXPECT_EQ(nlohmann::json::parse(out.substr(out.find('{')))["tokens"], tokens) << flags;
  }
  const std::string bad = GenerateSix("-ub 0", &rc);
  EXPECT_EQ(rc, 2) << bad;
  EXPECT_NE(bad.find("ubatch"), std::string::npos) << bad;
}

// One exit-code convention: a usage error (no or unknown command, unknown flag) is 2 in every
// command and lab subcommand, with the usage or the error on stderr; --help is 0.
TEST(Cli, UsageErrorsExitTwoInEveryCommand) {
  const std::vector<std::string> commands = {
      "generate",         "chat",     "serve",        "inspect",     "tokenize",   "detokenize",
      "convert",          "quantize", "lab logprobs", "lab diverge", "lab accept", "lab probe",
      "lab identity-diff"};
  int rc = -1;
  for (const std::string& bad : {std::string(""), std::string("nosuchcommand"), std::string("lab"),
                                 std::string("lab nosuchexperiment")}) {
    const std::string out = testing::RunCli(LOCKSTEP_BINARY, bad + " </dev/null", &rc);
    EXPECT_EQ(rc, 2) << "'" << bad << "': " << out;
    EXPECT_FALSE(out.empty()) << "'" << bad << "' printed nothing";
  }
  for (const std::string& cmd : commands) {
    const std::string out = testing::RunCli(LOCKSTEP_BINARY, cmd + " --bogus-flag </dev/null", &rc);
    EXPECT_EQ(rc, 2) << cmd << ": " << out;
    EXPECT_FALSE(out.empty()) << cmd << " printed nothing";
    testing::RunCli(LOCKSTEP_BINARY, cmd + " --help", &rc);
    EXPECT_EQ(rc, 0) << cmd << " --help";  // control: the command itself parses
  }
}

// --top-p, --min-p and --repeat-penalty through the CLI keep speculative output equal to plain
// (sampled, seeded); control: the filters change the output, so the equality is not vacuous.
TEST(GenerateCli, SamplingFiltersKeepSpeculationExact) {
  REQUIRE_MODELS();
  const auto tokens = [](const std::string& flags) {
    int rc = -1;
    const std::string out = testing::RunCli(
        LOCKSTEP_BINARY,
        fmt::format("generate -m {} -p 'def f(x):' -n 24 --temp 0.9 --seed 7 --json --no-hash {}",
                    Target(), flags),
        &rc);
    EXPECT_EQ(rc, 0) << flags << ": " << out;
    const auto at = out.find('{');
    return at == std::string::npos ? nlohmann::json()
                                   : nlohmann::json::parse(out.substr(at))["tokens"];
  };
  const std::string filters = "--top-p 0.9 --min-p 0.05 --repeat-penalty 1.3";
  const auto plain = tokens(filters);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(tokens(filters + " --draft " + Drafter() + " --draft-max 3"), plain);
  EXPECT_NE(tokens(""), plain);
}

// -t's default counts cores, not hardware threads: 2 packages x 2 cores x 2 SMT threads is 4
// (core ids repeat across packages); a cpuinfo without core ids falls back.
TEST(GenerateCli, PhysicalCoresCountsCoresPerPackageNotThreads) {
  std::string cpuinfo;
  for (int package = 0; package < 2; ++package)
    for (int core = 0; core < 2; ++core)
      for (int smt = 0; smt < 2; ++smt)
        cpuinfo += fmt::format("processor\t: {}\nphysical id\t: {}\ncore id\t\t: {}\n\n",
                               package * 4 + core * 2 + smt, package, core);
  std::istringstream two_packages(cpuinfo);
  EXPECT_EQ(cli::PhysicalCoresFromCpuinfo(two_packages, 8), 4);
  std::istringstream no_ids("processor\t: 0\nprocessor\t: 1\n");
  EXPECT_EQ(cli::PhysicalCoresFromCpuinfo(no_ids, 2), 2);
  std::istringstream empty("");
  EXPECT_EQ(cli::PhysicalCoresFromCpuinfo(empty, 0), 1);
}

// The README's command table and the commands' --help agree: every flag a row names is in the
// --help of that row's command (for `lab a|b|c` and tokenize/detokenize: one of them).
TEST(Readme, EveryFlagOfTheCommandTableIsInThatCommandsHelp) {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md";
  const std::regex row(R"(^\| `lockstep ([^`]*)`)"), word(R"([^ ]+)");
  const std::regex flag(R"((^|[^\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z]{1,3})(?![\w-]))");
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    std::vector<std::string> words;
    const std::string usage = m[1];
    for (std::sregex_iterator it(usage.begin(), usage.end(), word), end; it != end; ++it)
      words.push_back(it->str());
    std::vector<std::string> commands = {words[0]};
    if (words[0] == "tokenize") commands.push_back("detokenize");
    if (words[0] == "lab" && words.size() > 1) {
      commands.clear();
      std::string subs = std::regex_replace(words[1], std::regex(R"(\\)"), "");
      for (size_t at = 0; at <= subs.size();) {
        const size_t bar = std::min(subs.find('|', at), subs.size());
        commands.push_back("lab " + subs.substr(at, bar - at));
        at = bar + 1;
      }
    }
    std::string help;
    for (const std::string& c : commands) {
      int rc = -1;
      help += testing::RunCli(LOCKSTEP_BINARY, c + " --help", &rc);
      EXPECT_EQ(rc, 0) << c << " --help";
    }
    for (std::sregex_iterator it(line.begin(), line.end(), flag), end; it != end; ++it) {
      const std::string f = (*it)[2];
      const std::regex in_help("(^|[^\\w-])" + f + "(?![\\w-])");
      EXPECT_TRUE(std::regex_search(help, in_help))
          << "README names " << f << " for '" << usage << "', which its --help does not show";
    }
  }
  EXPECT_GE(rows, 8);  // control: the table was found
}

// Progress bars (convert's and quantize's \r-redrawn lines) only when stderr is a terminal:
// drawn on a pseudo-terminal (util-linux `script`), never into a pipe, and not with -q there.
TEST(ConvertCli, ProgressBarsOnlyOnATerminal) {
  int rc = -1;
  testing::RunShell("command -v script", &rc);
  if (rc != 0) GTEST_SKIP() << "no `script` (util-linux) for a pseudo-terminal";
  const fs::path dir = fs::temp_directory_path() / fmt::format("lockstep-progress.{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/hf/unified", dir / "unified");
  const std::string hf = (dir / "unified").string(), f32 = (dir / "u.gguf").string();
  const auto on_tty = [&](const std::string& args) {
    return testing::RunShell(fmt::format("script -q -e -c {} /dev/null",
                                         testing::ShellQuote(LOCKSTEP_BINARY + (" " + args))),
                             &rc);
  };
  const std::string convert_tty = on_tty(fmt::format("convert {} -o {}", hf, f32));
  EXPECT_EQ(rc, 0) << convert_tty;
  EXPECT_NE(convert_tty.find("\r["), std::string::npos) << convert_tty;
  EXPECT_NE(convert_tty.find("100% of"), std::string::npos) << convert_tty;
  const std::string quantize_tty =
      on_tty(fmt::format("quantize {} {}/q.gguf Q8_0", f32, dir.string()));
  EXPECT_EQ(rc, 0) << quantize_tty;
  EXPECT_NE(quantize_tty.find("\r["), std::string::npos) << quantize_tty;
  const std::string quiet_tty =
      on_tty(fmt::format("convert {} -o {}/q2.gguf -q", hf, dir.string()));
  EXPECT_EQ(rc, 0) << quiet_tty;
  EXPECT_EQ(quiet_tty.find("\r["), std::string::npos) << quiet_tty;
  const std::string piped = testing::RunCli(
      LOCKSTEP_BINARY, fmt::format("convert {} -o {}/p.gguf", hf, dir.string()), &rc);
  EXPECT_EQ(rc, 0) << piped;
  EXPECT_EQ(piped.find('\r'), std::string::npos) << piped;
  EXPECT_NE(piped.find("wrote"), std::string::npos) << piped;  // notes still go to a pipe
  fs::remove_all(dir);
}

TEST(ChatCli, HiddenThinkingDropsTheChannelSpanOnly) {
  cli::ThinkingFilter hide(100, 101);
  std::vector<int32_t> shown;
  for (int32_t id : {5, 100, 6, 7, 101, 8, 100, 9})  // a second span, left open at the end
    if (hide.Show(id)) shown.push_back(id);
  EXPECT_EQ(shown, (std::vector<int32_t>{5, 8}));
  cli::ThinkingFilter show(std::nullopt, std::nullopt);  // negative control: shown by default
  shown.clear();
  for (int32_t id : {5, 100, 6, 101})
    if (show.Show(id)) shown.push_back(id);
  EXPECT_EQ(shown.size(), 4u);
}

// --hide-thinking end to end through the printer chat and generate stream with: the model's
// own <|channel> / <channel|> ids are found in its tokenizer and the span between them is not
// printed; without the flag (the control) it is.
TEST(ChatCli, HideThinkingDropsTheModelsChannelSpanFromThePrintedText) {
  REQUIRE_MODELS();
  auto file = gguf::File::Open(Target());
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const auto piece = [&](const std::string& text) { return (*tok)->Encode(text, false, false); };
  std::vector<int32_t> ids = piece("def f():");
  std::optional<int32_t> open, close;
  for (int32_t id = 0; id < (*tok)->n_tokens(); ++id) {
    if ((*tok)->token_text(id) == "<|channel>") open = id;
    if ((*tok)->token_text(id) == "<channel|>") close = id;
  }
  ASSERT_TRUE(open && close) << "the default tokenizer has Gemma 4's channel tokens";
  ids.push_back(*open);
  for (int32_t id : piece("secret plan")) ids.push_back(id);
  ids.push_back(*close);
  for (int32_t id : piece("\n    return 1")) ids.push_back(id);
  FILE* sink = std::fopen("/dev/null", "w");
  ASSERT_NE(sink, nullptr);
  cli::StreamOptions so;
  so.out = sink;
  so.hide_thinking = true;
  const std::string hidden = cli::PrintTokens(tok->get(), ids, so);
  so.hide_thinking = false;
  const std::string shown = cli::PrintTokens(tok->get(), ids, so);
  std::fclose(sink);
  EXPECT_EQ(hidden, "def f():\n    return 1");
  EXPECT_NE(shown.find("secret plan"), std::string::npos) << shown;
}

TEST(ChatCli, ResetStartsOverAndRepliesMatchGenerate) {
  REQUIRE_MODELS();
  int rc = 0;
  const std::string alone = testing::RunShell(ChatCmd("hi\\n/exit\\n", "2>/dev/null"), &rc);
  EXPECT_EQ(rc, 0);
  const std::string reset =
      testing::RunShell(ChatCmd("hello\\n/reset\\nhi\\n/exit\\n", "2>/dev/null"), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(reset, alone);
  EXPECT_TRUE(reset.ends_with(alone)) << reset << "\n---\n" << alone;
  EXPECT_NE(reset.find("(new conversation)"), std::string::npos);
  // The reply is generate's with the same template, streamed after the "> " prompt.
  const std::string gen =
      testing::RunShell(fmt::format("{} generate -m {} --chat --chat-template-file {} -p hi "
                                    "-n 12 --no-display-prompt 2>/dev/null",
                                    LOCKSTEP_BINARY, Target(), Template()),
                        &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(alone, "> " + gen + "> \n");
  // Without /reset the second turn's prompt holds the first exchange (end of input also quits).
  const std::string two = testing::RunShell(ChatCmd("hello\\nhi\\n", "2>&1 >/dev/null"), &rc);
  EXPECT_EQ(rc, 0);
  std::smatch m;
  std::vector<int> prompts;
  for (std::string s = two; std::regex_search(s, m, std::regex("lockstep: ([0-9]+) prompt \\+"));
       s = m.suffix())
    prompts.push_back(std::stoi(m[1]));
  ASSERT_EQ(prompts.size(), 2u) << two;
  EXPECT_GT(prompts[1], prompts[0] + 4) << two;
}

// --think reaches the template (enable_thinking: the <|think|> switch in the system turn and no
// empty thought channel in the generation prompt), so the prompt the model sees changes;
// --hide-thinking only filters what is printed and leaves the prompt alone (the control).
TEST(ChatCli, ThinkChangesThePromptAndHideThinkingDoesNot) {
  REQUIRE_MODELS();
  const auto prompt_tokens = [](const std::string& flags) {
    int rc = -1;
    const std::string err =
        testing::RunShell(ChatCmd("hi\\n/exit\\n", flags + " 2>&1 >/dev/null"), &rc);
    EXPECT_EQ(rc, 0) << err;
    std::smatch m;
    return std::regex_search(err, m, std::regex("lockstep: ([0-9]+) prompt \\+")) ? std::stoi(m[1])
                                                                                  : -1;
  };
  const int plain = prompt_tokens("");
  ASSERT_GT(plain, 0);
  EXPECT_NE(prompt_tokens("--think"), plain);
  EXPECT_EQ(prompt_tokens("--hide-thinking"), plain);
}

TEST(ChatCli, DraftAndLlamaCppAliasesGiveTheSameReplies) {
  REQUIRE_MODELS();
  int rc = 0;
  const std::string input = "def f(x):\\nand g?\\n/exit\\n";
  const std::string plain = testing::RunShell(ChatCmd(input, "2>/dev/null"), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(testing::RunShell(ChatCmd(input, "--draft " + Drafter() + " 2>/dev/null"), &rc), plain);
  for (const char* alias : {"-cnv", "-i", "--conversation"}) {
    const std::string cmd = fmt::format(
        "printf '{}' | {} generate {} -m {} --chat-template-file {} "
        "-n 12 2>/dev/null",
        input, LOCKSTEP_BINARY, alias, Target(), Template());
    EXPECT_EQ(testing::RunShell(cmd, &rc), plain) << alias;
    EXPECT_EQ(rc, 0);
  }
  // Negative control: another input gives other output, so the equalities above mean something.
  EXPECT_NE(testing::RunShell(ChatCmd("class A:\\n/exit\\n", "2>/dev/null"), &rc), plain);
}

TEST(InstallTarget, InstalledLockstepFindsItsModelsFromAnyDirectory) {
  REQUIRE_MODELS();
  const fs::path prefix = fs::temp_directory_path() / fmt::format("lockstep-prefix.{}", ::getpid());
  fs::remove_all(prefix);
  int rc = 0;
  const std::string log = testing::RunShell(
      fmt::format("cmake --install {} --prefix {} 2>&1", LOCKSTEP_BUILD_DIR, prefix.string()), &rc);
  ASSERT_EQ(rc, 0) << log;
  const std::string run = fmt::format(
      "cd / && {}/bin/lockstep generate -p 'def f(x):' -n 3 --json "
      "--no-hash 2>&1",
      prefix.string());
  const std::string out = testing::RunShell(run, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"n_generated\":3"), std::string::npos) << out;
  // --draft without a path takes the installed default drafter the same way.
  const std::string spec =
      testing::RunShell(fmt::format("cd / && {}/bin/lockstep generate -p 'def f(x):' -n 3 "
                                    "--json --no-hash --draft 2>&1",
                                    prefix.string()),
                        &rc);
  EXPECT_EQ(rc, 0) << spec;
  EXPECT_NE(spec.find("\"drafted\":"), std::string::npos) << spec;
  EXPECT_EQ(out.find("\"drafted\":"), std::string::npos);
  // Negative control: without the installed models the same command cannot find a model.
  fs::remove_all(prefix / "share" / "lockstep");
  EXPECT_NE(testing::RunShell(run, &rc).find("lockstep-code-target.gguf"), std::string::npos);
  EXPECT_EQ(rc, 1);
  fs::remove_all(prefix);
}

}  // namespace
}  // namespace lockstep

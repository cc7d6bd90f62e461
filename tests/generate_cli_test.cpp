// `lockstep generate` end to end: several prompts decoded together (--prompts-file, --parallel)
// print the same tokens as each prompt run alone, and bad input gets a clear error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/sha256.h"
#include "gguf/gguf.h"
#include "testing/run_cli.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::string RunCommand(const std::string& args, int* rc) {
  return testing::RunCli(LOCKSTEP_BINARY, args, rc);
}

std::vector<nlohmann::json> JsonLines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  size_t at = 0;
  while (at < out.size()) {
    const size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end == std::string::npos ? end : end - at);
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return lines;
}

struct DefaultPair {
  std::string target, draft;
  bool present() const { return fs::exists(target) && fs::exists(draft); }
};

DefaultPair Pair() {
  const std::string dir = std::string(LOCKSTEP_SOURCE_DIR) + "/models/";
  return {dir + "lockstep-code-target.gguf", dir + "lockstep-code-assistant.gguf"};
}

std::string Scratch(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "lockstep-tests";
  fs::create_directories(dir);
  const fs::path path = dir / fmt::format("{}.{}", name, ::getpid());
  std::ofstream(path) << text;
  return path.string();
}

TEST(GenerateCli, PromptsFileTogetherEqualsEachAlone) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  const std::vector<std::string> lines = {
      R"("def fibonacci(n):")", R"("class Stack:\n    def __init__(self):")", "[2, 947, 334]",
      R"("import os\nimport sys\n")", R"("def add(a, b):")"};
  std::string text;
  for (const auto& l : lines) text += l + "\n\n";  // blank lines are skipped
  const std::string file = Scratch("prompts", text);
  for (const char* spec : {"", "--draft-max 4"}) {
    const std::string draft = *spec ? fmt::format("--draft {} {}", p.draft, spec) : "";
    int rc = 0;
    const std::string out =
        RunCommand(fmt::format("generate -m {} {} --prompts-file {} --parallel 3 -n 24 --temp 0.7 "
                               "--seed 5",
                               p.target, draft, file),
                   &rc);
    ASSERT_EQ(rc, 0) << out;
    const auto together = JsonLines(out);
    ASSERT_EQ(together.size(), lines.size()) << out;
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(together[i]["index"], i);
      const std::string one = Scratch("one", lines[i] + "\n");
      const auto alone = JsonLines(
          RunCommand(fmt::format("generate -m {} {} --prompts-file {} -n 24 --temp 0.7 --seed 5",
                                 p.target, draft, one),
                     &rc));
      ASSERT_EQ(alone.size(), 1u);
      EXPECT_EQ(together[i]["tokens"], alone[0]["tokens"]) << "prompt " << i << " " << spec;
      fs::remove(one);
    }
    // Different prompts give different outputs (the comparison can fail).
    EXPECT_NE(together[0]["tokens"], together[1]["tokens"]);
  }
  fs::remove(file);
}

TEST(GenerateCli, BadInputIsAClearError) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  const std::string bad = Scratch("bad-prompts", "\"ok\"\n{\"not\": \"a prompt\"}\n");
  int rc = 0;
  std::string out = RunCommand(fmt::format("generate -m {} --prompts-file {}", p.target, bad), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(bad + ":2"), std::string::npos) << out;
  out = RunCommand(fmt::format("generate -m {} -p x --cache-type-k q9", p.target), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--cache-type-k"), std::string::npos) << out;
  // An impossible context is a message before any allocation (it was std::bad_alloc).
  out = RunCommand(fmt::format("generate -m {} -p x -n 2 -c 100000000", p.target), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("beyond the model's trained"), std::string::npos) << out;
  out = RunCommand(fmt::format("generate -m {} -p x --device tpu", p.target), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("tpu"), std::string::npos) << out;
  fs::remove(bad);
}

// Byte tokens (here the bytes of a CJK character, cut short) make text that is not valid
// UTF-8: JSON output replaces them and never aborts (it used to throw type_error.316).
TEST(GenerateCli, JsonWithInvalidUtf8NeverAborts) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  const std::string a = Scratch("utf8-a", "[2, 255, 213, 187]"),
                    b = Scratch("utf8-b", "[2, 255, 187]");
  for (const std::string& args :
       {fmt::format("lab logprobs -m {} --tokens 2,255,213,187 --json", p.target),
        fmt::format("lab diverge -m {} {} {} --json", p.target, a, b),
        fmt::format("generate -m {} --tokens 2,255,213 -n 3 --json", p.target)}) {
    const std::string out = RunCommand(args, &rc);
    EXPECT_LT(rc, 2) << args << "\n" << out;  // diverge: 1 = the streams differ
    const auto lines = JsonLines(out);
    EXPECT_EQ(lines.size(), 1u) << args << "\n" << out;
    // A lone byte token's piece is replaced, never emitted raw; its id keeps the exact byte.
    if (args.starts_with("lab logprobs") && lines.size() == 1) {
      const auto& pos = lines[0]["positions"][0];
      EXPECT_EQ(pos["token"], 255);
      EXPECT_EQ(pos["piece"], "\xEF\xBF\xBD") << pos.dump();
    }
  }
  fs::remove(a);
  fs::remove(b);
}

// An assistant file given as the target is a clear error naming the file, not an abort.
TEST(GenerateCli, AssistantAsTargetIsAClearError) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  // Every command that loads a target fails at load (chat used to fail only at its first
  // reply, serve only on the first request); a serve that does not fail is stopped at 30 s.
  for (const char* cmd : {"generate -m {} -p hi", "lab logprobs -m {} --tokens 2,3,4",
                          "chat -m {} < /dev/null", "serve -m {} --port 0 < /dev/null"}) {
    const std::string out = testing::RunShell(fmt::format("timeout 30 {} {} 2>&1", LOCKSTEP_BINARY,
                                                          fmt::format(fmt::runtime(cmd), p.draft)),
                                              &rc);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find(p.draft + ": this is a Gemma 4 assistant"), std::string::npos) << out;
  }
}

// --compare (scripts/demo.sh's check) exits 1 when speculative and plain differ, 0 when equal,
// on both output paths. The pair never differs (that is the point of lockstep), so the CLI runs
// show the equal case on the streaming and --json paths and the exit code function they share
// is held to the unequal case directly.
TEST(GenerateCli, CompareExitsOneOnlyWhenSpeculativeAndPlainDiffer) {
  const std::vector<int32_t> a = {5, 6, 7}, b = {5, 6, 8}, shorter = {5, 6};
  EXPECT_EQ(cli::CompareExitCode(a, a), 0);
  EXPECT_EQ(cli::CompareExitCode(a, b), 1);
  EXPECT_EQ(cli::CompareExitCode(a, shorter), 1);
  EXPECT_EQ(cli::CompareExitCode(shorter, a), 1);
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  const std::string base = fmt::format(
      "generate -m {} --draft {} -p 'def f(x):' -n 24 --compare --no-hash", p.target, p.draft);
  const std::string json = RunCommand(base + " --json 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0) << json;
  EXPECT_NE(json.find("\"plain_equal\":true"), std::string::npos) << json;
  const std::string streamed = RunCommand(base, &rc);
  EXPECT_EQ(rc, 0) << streamed;
  EXPECT_EQ(streamed.find("DIFFER"), std::string::npos) << streamed;
}

// Non-finite values are usage errors (they used to run and emit <pad> forever); --seed -1 draws
// a random seed, prints it and records it so the run can be repeated.
TEST(GenerateCli, NonFiniteOptionsAreRefusedAndSeedMinusOneIsRandom) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  for (const char* opt : {"--temp nan", "--temp inf", "--draft-p-min nan", "--seed -2"}) {
    const std::string out =
        RunCommand(fmt::format("generate -m {} -p hi -n 2 {}", p.target, opt), &rc);
    EXPECT_EQ(rc, 2) << opt << "\n" << out;
  }
  const std::string out = RunCommand(
      fmt::format("generate -m {} -p 'def f(x):' -n 8 --temp 1 --seed -1 --json", p.target), &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto lines = JsonLines(out);
  ASSERT_EQ(lines.size(), 1u);
  const uint64_t seed = lines[0]["identity"]["settings"]["seed"].get<uint64_t>();
  // The identity names the prompt (its ids' sha256), so runs of different prompts differ there.
  EXPECT_EQ(lines[0]["identity"]["prompt_sha256"].get<std::string>(),
            IdsSha256(lines[0]["prompt_tokens"].get<std::vector<int32_t>>()));
  EXPECT_NE(out.find(fmt::format("random seed {}", seed)), std::string::npos) << out;
  EXPECT_LT(seed, uint64_t{1} << 63);
  const auto again = JsonLines(RunCommand(
      fmt::format("generate -m {} -p 'def f(x):' -n 8 --temp 1 --seed {} --json", p.target, seed),
      &rc));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["tokens"], lines[0]["tokens"]);
}

// A tokenizer with one token more than the embedding has rows (as real 262,145-token tokenizers
// over 262,144-row embeddings) is refused with a message; it used to load silently.
TEST(GenerateCli, TokenizerLargerThanTheEmbeddingIsRefused) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  auto src = gguf::File::Open(p.target);
  ASSERT_TRUE(src.ok());
  gguf::Writer w;
  for (const auto& [key, value] : (*src)->metadata()) {
    gguf::Value v = value;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" ||
        key == "tokenizer.ggml.token_type") {
      auto& items = std::get<gguf::Array>(v.v).items;
      gguf::Value extra = items.back();
      if (key == "tokenizer.ggml.tokens") extra = gguf::Value::Str("<extra_token>");
      items.push_back(extra);
    }
    w.Set(key, v);
  }
  for (const auto& t : (*src)->tensors())
    w.AddTensorCopy(t.name, t.type, t.ne, (*src)->TensorData(t));
  const std::string path = Scratch("extra-token.gguf", "");
  ASSERT_TRUE(w.WriteFile(path).ok());
  int rc = 0;
  const std::string out = RunCommand(fmt::format("generate -m {} -p hi -n 2", path), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("8193 tokens but token_embd.weight has 8192 rows"), std::string::npos) << out;
  fs::remove(path);
}

// llama.cpp's flag names work as aliases and give the same run.
TEST(GenerateCli, LlamaCppFlagNamesAreAliases) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  const auto ours = JsonLines(RunCommand(
      fmt::format("generate -m {} -p 'def f(x):' -n 12 --draft {} --draft-max 2 -c 64 --seed 3 "
                  "--temp 0.5 --json",
                  p.target, p.draft),
      &rc));
  ASSERT_EQ(rc, 0);
  const std::string out = RunCommand(
      fmt::format("generate -m {} -p 'def f(x):' -n 12 -md {} --spec-draft-n-max 2 --ctx-size 64 "
                  "-s 3 --temp 0.5 -ngl 99 --json",
                  p.target, p.draft),
      &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto theirs = JsonLines(out);
  ASSERT_EQ(ours.size(), 1u);
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(ours[0]["tokens"], theirs[0]["tokens"]);
  EXPECT_EQ(ours[0]["draft"], theirs[0]["draft"]);
  // The notice says the layers stay on the CPU; with a GPU they run there and none is due.
  if (theirs[0]["identity"]["backend"] == "cpu") {
    EXPECT_NE(out.find("-ngl 99 ignored"), std::string::npos) << out;
  }
}

// --json hashes a model once: the digest is cached by file identity and modification time. The
// test plants a wrong digest for a copy of the model and sees it reported (the cache is read),
// then changes the file's time and sees the true digest again (the cache is keyed right).
TEST(GenerateCli, ModelHashesAreCachedByFileIdentity) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  const fs::path dir =
      fs::temp_directory_path() / "lockstep-tests" / fmt::format("hash-cache-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path model = dir / "target.gguf";
  fs::copy_file(p.target, model, fs::copy_options::overwrite_existing);
  const std::string cmd = fmt::format("generate -m {} --tokens 2,3 -n 2 --json", model.string());
  auto sha_of = [&](const std::string& extra) {
    int rc = 0;
    const std::string out =
        RunCommand(cmd + extra, &rc);  // the binary inherits the environment set below
    const auto lines = JsonLines(out);
    EXPECT_EQ(lines.size(), 1u) << out;
    return lines.empty() ? std::string() : lines[0]["identity"]["model_sha256"].get<std::string>();
  };
  ::setenv("LOCKSTEP_CACHE_DIR", dir.c_str(), 1);
  const std::string real = sha_of("");
  ASSERT_EQ(real.size(), 64u);
  EXPECT_EQ(sha_of(""), real);
  // Plant a digest for the same key.
  std::ifstream in(dir / "file-sha256.tsv");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  in.close();
  const std::string planted(64, 'a');
  line.replace(line.find(real), real.size(), planted);
  std::ofstream(dir / "file-sha256.tsv") << line << "\n";
  EXPECT_EQ(sha_of(""), planted);
  // A new modification time is a new key: the true digest again.
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
  EXPECT_EQ(sha_of(""), real);
  EXPECT_EQ(sha_of(" --no-hash"), "not computed (--no-hash)");
  ::unsetenv("LOCKSTEP_CACHE_DIR");
  fs::remove_all(dir);
}

TEST(GenerateCli, F16CacheIsStableRunToRun) {
  const DefaultPair p = Pair();
  if (!p.present()) GTEST_SKIP() << "no default pair under models/";
  int rc = 0;
  const std::string cmd = fmt::format(
      "generate -m {} -p 'def f(x):' -n 32 --cache-type-k f16 --cache-type-v bf16 --json",
      p.target);
  const auto a = JsonLines(RunCommand(cmd, &rc));
  ASSERT_EQ(rc, 0);
  const auto b = JsonLines(RunCommand(cmd + " -t 1", &rc));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0]["tokens"], b[0]["tokens"]);
}

}  // namespace
}  // namespace lockstep

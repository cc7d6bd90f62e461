// Real clients against a `lockstep serve` process with the default pair and the Gemma 4 chat
// template: the npm `openai` SDK (tests/js/openai_sdk_test.js) and the chat page in headless
// Chromium (tests/js/web_page_test.js), both pinned in tests/js/package.json. Each skips, saying
// why, when node, the npm packages (scripts/fetch-tokenizer-ref.sh) or chromium is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "testing/run_cli.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

// Skips unless node and tests/js/node_modules/<package> are there; returns tests/js.
std::string NodePackageOrSkip(const std::string& package, bool* skip) {
  const std::string js = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/js";
  *skip = true;
  if (!std::filesystem::exists(js + "/node_modules/" + package + "/package.json")) {
    GTEST_LOG_(INFO) << js << "/node_modules/" << package << " is missing";
    return js;
  }
  int rc = 0;
  testing::RunCli("node", "--version", &rc);
  *skip = rc != 0;
  return js;
}

// `lockstep serve` with the default pair and the chat template (and `api_key` unless empty);
// pid -1 when the pair is absent.
testing::ServeProcess StartDefaultPair(const std::string& js, const std::string& api_key) {
  const std::string models = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-";
  if (!std::filesystem::exists(models + "target.gguf") ||
      !std::filesystem::exists(models + "assistant.gguf"))
    return {};
  std::vector<std::string> args = {"-m",
                                   models + "target.gguf",
                                   "--draft",
                                   models + "assistant.gguf",
                                   "-c",
                                   "512",
                                   "-np",
                                   "4",
                                   "--no-hash",
                                   "--chat-template-file",
                                   js + "/../data/templates/gemma4.jinja"};
  if (!api_key.empty()) args.insert(args.end(), {"--api-key", api_key});
  return testing::SpawnServe(LOCKSTEP_BINARY, args);
}

// Runs `node SCRIPT_AND_ARGS`, expects it to pass, prints its summary, stops the server.
void ExpectNodePasses(const std::string& script_and_args, testing::ServeProcess& p) {
  int rc = 0;
  const std::string out = testing::RunCli("node", script_and_args, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
  std::printf("[ serve ] %s", out.c_str());
  EXPECT_EQ(testing::StopServe(p), 0);
}

TEST(ServeSdk, OpenAiClientGetsWhatItExpects) {
  bool skip = false;
  const std::string js = NodePackageOrSkip("openai", &skip);
  if (skip)
    GTEST_SKIP() << "node or " << js
                 << "/node_modules/openai missing: run scripts/fetch-tokenizer-ref.sh";
  testing::ServeProcess p = StartDefaultPair(js, "sdk-test-key");
  if (p.pid < 0) GTEST_SKIP() << "no default pair under models/";
  ASSERT_GT(p.port, 0) << p.line;
  ExpectNodePasses(fmt::format("{}/openai_sdk_test.js http://127.0.0.1:{}/v1", js, p.port), p);
}

// The page's own requests carry no key, so this server runs without --api-key.
TEST(ServeSdk, ChatPageWorksInHeadlessChromium) {
  bool skip = false;
  const std::string js = NodePackageOrSkip("puppeteer-core", &skip);
  if (skip)
    GTEST_SKIP() << "node or " << js
                 << "/node_modules/puppeteer-core missing: run scripts/fetch-tokenizer-ref.sh";
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium))
    GTEST_SKIP() << chromium << " missing: scripts/install-deps.sh installs it";
  testing::ServeProcess p = StartDefaultPair(js, "");
  if (p.pid < 0) GTEST_SKIP() << "no default pair under models/";
  ASSERT_GT(p.port, 0) << p.line;
  ExpectNodePasses(fmt::format("{}/web_page_test.js http://127.0.0.1:{} {}", js, p.port, chromium),
                   p);
}

}  // namespace
}  // namespace lockstep

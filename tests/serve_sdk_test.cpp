// The npm `openai` SDK (pinned in tests/js/package.json) against a `lockstep serve` process with
// the default pair and the Gemma 4 chat template: tests/js/openai_sdk_test.js must pass. Skips,
// saying why, when node or the SDK (scripts/fetch-tokenizer-ref.sh installs it) is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "testing/run_cli.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

TEST(ServeSdk, OpenAiClientGetsWhatItExpects) {
  const std::string src = LOCKSTEP_SOURCE_DIR;
  const std::string js = src + "/tests/js";
  if (!std::filesystem::exists(js + "/node_modules/openai/package.json"))
    GTEST_SKIP() << js << "/node_modules/openai is missing: run scripts/fetch-tokenizer-ref.sh";
  int rc = 0;
  testing::RunCli("node", "--version", &rc);
  if (rc != 0) GTEST_SKIP() << "node is not installed";
  const std::string target = src + "/models/lockstep-code-target.gguf";
  const std::string draft = src + "/models/lockstep-code-assistant.gguf";
  if (!std::filesystem::exists(target) || !std::filesystem::exists(draft))
    GTEST_SKIP() << "no default pair under models/";
  const testing::ServeProcess p = testing::SpawnServe(
      LOCKSTEP_BINARY, {"-m", target, "--draft", draft, "-c", "512", "-np", "4", "--no-hash",
                        "--api-key", "sdk-test-key", "--chat-template-file", js + "/gemma4.jinja"});
  ASSERT_GT(p.port, 0) << p.line;
  const std::string out = testing::RunCli(
      "node", fmt::format("{}/openai_sdk_test.js http://127.0.0.1:{}/v1", js, p.port), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
  std::printf("[ serve ] %s", out.c_str());
  EXPECT_EQ(testing::StopServe(p), 0);
}

}  // namespace
}  // namespace lockstep

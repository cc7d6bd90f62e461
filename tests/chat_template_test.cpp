// Chat template: lockstep's native Gemma 4 renderer vs @huggingface/jinja running the template.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace lockstep::tokenizer {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TemplatePath() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/js/gemma4.jinja";
}

std::string RefPath() {
  const char* e = std::getenv("LOCKSTEP_TOKREF_DIR");
  return std::string(
             e ? e : std::string(LOCKSTEP_SOURCE_DIR) + "/tests/js/node_modules/.lockstep-ref") +
         "/chat_cases.json";
}

ChatOptions OptionsOf(const json& in) {
  ChatOptions o;
  o.add_generation_prompt = in.value("add_generation_prompt", false);
  if (in.contains("enable_thinking")) o.enable_thinking = in["enable_thinking"].get<bool>();
  if (in.contains("tools")) o.tools = in["tools"];
  o.bos_token = in.value("bos_token", std::string());
  return o;
}

TEST(ChatTemplate, MatchesJinjaReference) {
  if (!std::filesystem::exists(RefPath()))
    GTEST_SKIP() << "no JS reference at " << RefPath()
                 << ": run scripts/fetch-tokenizer-ref.sh (needs node and npm)";
  const json ref = json::parse(ReadFile(RefPath()));
  const std::string tmpl = ReadFile(TemplatePath());
  ASSERT_EQ(ref["template"].get<std::string>(), tmpl) << "reference rendered another template";
  const auto& cases = ref["cases"];
  ASSERT_GE(cases.size(), 30u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& in = cases[i]["input"];
    auto got = RenderChat(tmpl, in["messages"], OptionsOf(in));
    ASSERT_TRUE(got.ok()) << "case " << i << ": " << got.status().message();
    EXPECT_EQ(*got, cases[i]["expected"].get<std::string>()) << "case " << i << ": " << in.dump();
  }
}

TEST(ChatTemplate, OptionsChangeTheOutput) {
  // Negative control for the comparison above: flipping an option must change the rendering.
  const std::string tmpl = ReadFile(TemplatePath());
  const json msgs = json::parse(R"([{"role":"user","content":"Q"}])");
  ChatOptions o;
  auto plain = RenderChat(tmpl, msgs, o);
  o.enable_thinking = true;
  auto think = RenderChat(tmpl, msgs, o);
  ASSERT_TRUE(plain.ok() && think.ok());
  EXPECT_NE(*plain, *think);
  EXPECT_NE(think->find("<|think|>"), std::string::npos);
  EXPECT_EQ(plain->rfind("<bos>", 0), 0u);
}

TEST(ChatTemplate, RefusesUnknownTemplates) {
  const std::string tmpl = ReadFile(TemplatePath());
  const json msgs = json::parse(R"([{"role":"user","content":"Hi"}])");
  // Negative control: a one-byte edit, or the Gemma 3 format, must be refused with a message.
  for (std::string other : {tmpl + " ", std::string("{{ bos_token }}{% for m in messages %}"
                                                    "<start_of_turn>{{ m.role }}{% endfor %}")}) {
    auto r = RenderChat(other, msgs, ChatOptions{});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("not recognised"), std::string::npos);
  }
  EXPECT_FALSE(RenderChat(tmpl, json::array(), ChatOptions{}).ok());
}

}  // namespace
}  // namespace lockstep::tokenizer

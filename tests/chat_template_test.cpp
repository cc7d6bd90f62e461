// Chat templates: lockstep's Jinja interpreter vs @huggingface/jinja on every Gemma 4 template
// revision in tests/data/templates, construct snippets, and error messages naming the line.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "template/template.h"
#include "tokenizer/chat_template.h"

namespace lockstep::tokenizer {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TemplatePath(const std::string& name) {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/templates/" + name + ".jinja";
}

std::string RefDir() {
  const char* e = std::getenv("LOCKSTEP_TOKREF_DIR");
  return e ? e : std::string(LOCKSTEP_SOURCE_DIR) + "/tests/js/node_modules/.lockstep-ref";
}

ChatOptions OptionsOf(const ordered_json& in) {
  ChatOptions o;
  o.add_generation_prompt = in.value("add_generation_prompt", false);
  if (in.contains("enable_thinking")) o.enable_thinking = in["enable_thinking"].get<bool>();
  if (in.contains("tools")) o.tools = json(in["tools"]);
  o.bos_token = in.value("bos_token", std::string());
  return o;
}

Expected<std::string> RenderCase(const std::string& tmpl, const ordered_json& in) {
  return RenderChat(tmpl, json(in["messages"]), OptionsOf(in));
}

class ChatTemplateRef : public ::testing::TestWithParam<std::string> {
 protected:
  // The reference for this template, or a skip reason.
  bool Load(ordered_json* ref, std::string* tmpl) {
    const std::string path = RefDir() + "/chat_" + GetParam() + ".json";
    if (!std::filesystem::exists(path)) return false;
    *ref = ordered_json::parse(ReadFile(path));
    *tmpl = ReadFile(TemplatePath(GetParam()));
    return true;
  }
};

TEST_P(ChatTemplateRef, MatchesJinjaReferenceByteForByte) {
  ordered_json ref;
  std::string tmpl;
  if (!Load(&ref, &tmpl))
    GTEST_SKIP() << "no JS reference in " << RefDir()
                 << ": run scripts/fetch-tokenizer-ref.sh (needs node and npm)";
  ASSERT_EQ(ref["template"].get<std::string>(), tmpl) << "stale reference: rerun the fetch script";
  ASSERT_TRUE(CheckChatTemplate(tmpl).ok()) << CheckChatTemplate(tmpl).message();
  size_t rendered = 0, refused = 0;
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const ordered_json& c = ref["cases"][i];
    auto got = RenderCase(tmpl, c["input"]);
    if (c.contains("error")) {  // the reference refuses it: so must we
      EXPECT_FALSE(got.ok()) << "case " << i << " rendered, reference failed: " << c["error"];
      ++refused;
      continue;
    }
    ASSERT_TRUE(got.ok()) << "case " << i << ": " << got.status().message();
    EXPECT_EQ(*got, c["expected"].get<std::string>()) << "case " << i << ": " << c["input"].dump();
    ++rendered;
  }
  EXPECT_GE(rendered, 60u);
  std::cout << GetParam() << ": " << rendered << " conversations byte-identical, " << refused
            << " refused by both\n";
}

// Negative control: the comparison above must notice a one-token edit of the template and a
// one-character edit of a conversation.
TEST_P(ChatTemplateRef, DetectsAMutatedTemplateOrConversation) {
  ordered_json ref;
  std::string tmpl;
  if (!Load(&ref, &tmpl)) GTEST_SKIP() << "no JS reference in " << RefDir();
  std::string mutated = tmpl;
  const size_t at = mutated.find("'<turn|>\\n'");
  ASSERT_NE(at, std::string::npos);
  mutated.replace(at, 11, "'<turn|>'");
  size_t differ = 0, compared = 0;
  for (const ordered_json& c : ref["cases"]) {
    if (c.contains("error")) continue;
    auto got = RenderCase(mutated, c["input"]);
    ++compared;
    differ += !got.ok() || *got != c["expected"].get<std::string>();
  }
  EXPECT_GT(differ, compared / 2) << differ << " of " << compared << " differ";
  ordered_json in = ref["cases"][0]["input"];
  in["messages"][0]["content"] = "Hello?";
  auto got = RenderCase(tmpl, in);
  ASSERT_TRUE(got.ok());
  EXPECT_NE(*got, ref["cases"][0]["expected"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Gemma4, ChatTemplateRef,
                         ::testing::Values("gemma4", "google-gemma-4-31B-it",
                                           "google-gemma-4-31B-it-interleaved"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

TEST(JinjaSnippets, MatchReferenceIncludingErrors) {
  const std::string path = RefDir() + "/jinja_snippets.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no JS reference at " << path;
  const ordered_json rows = ordered_json::parse(ReadFile(path));
  ASSERT_GE(rows.size(), 70u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ordered_json& r = rows[i];
    const std::string src = r["template"].get<std::string>();
    auto t = jinja::Template::Parse(src);
    Expected<std::string> got =
        t.ok() ? t->Render(r["context"]) : Expected<std::string>(t.status());
    if (r.contains("error")) {
      EXPECT_FALSE(got.ok()) << "snippet " << i << " " << src << " rendered '" << *got
                             << "', reference: " << r["error"];
      continue;
    }
    ASSERT_TRUE(got.ok()) << "snippet " << i << " " << src << ": " << got.status().message();
    EXPECT_EQ(*got, r["expected"].get<std::string>()) << "snippet " << i << ": " << src;
  }
}

TEST(ChatTemplate, OptionsChangeTheOutput) {
  const std::string tmpl = ReadFile(TemplatePath("gemma4"));
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

// Any template the interpreter covers renders, not only Gemma's (the old renderer refused all
// but one fingerprint).
TEST(ChatTemplate, RendersOtherTemplates) {
  const std::string gemma3 =
      "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' "
      "else m.role }}\n{{ m.content | trim }}<end_of_turn>\n{% endfor %}"
      "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
  const json msgs = json::parse(R"([{"role":"user","content":" Hi "},{"role":"assistant",
                                    "content":"Yo"}])");
  auto r = RenderChat(gemma3, msgs, ChatOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r,
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_FALSE(RenderChat(gemma3, json::array(), ChatOptions{}).ok());
}

// Google's later revision (tests/data/templates/gemma4.jinja) renders JSON-schema union types
// (`type: ["string", "null"]`) with `reject('equalto', 'null') | list | first`, a filter
// @huggingface/jinja lacks (it refuses these conversations), so the reference here is Python
// Jinja2 3.1.6 with transformers' chat-template environment (trim_blocks, lstrip_blocks,
// loopcontrols, tojson with ensure_ascii=False), rendered once on the dev machine.
TEST(ChatTemplate, UnionTypesRenderLikeJinja2) {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/templates/gemma4.jinja");
  ASSERT_TRUE(in);
  const std::string tmpl{std::istreambuf_iterator<char>(in), {}};
  ChatOptions o;
  o.tools = json::parse(R"([{"type": "function", "function": {"name": "lookup",
      "description": "Look up a key.", "parameters": {"type": "object", "properties": {
      "key": {"type": ["string", "null"], "description": "Key"},
      "limit": {"type": ["integer", "null"]}}, "required": ["key"]},
      "response": {"description": "The value", "type": ["object", "null"]}}}])");
  const json msgs = json::parse(R"([{"role": "user", "content": "Look up x"}])");
  auto r = RenderChat(tmpl, msgs, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r,
            std::string("<bos><|turn>system\n<|tool>declaration:lookup{description:<|\"|>Look up a "
                        "key.<|\"|>,parameters:{properties:{key:{description:<|\"|>Key<|\"|>,type:<"
                        "|\"|>STRING<|\"|>},limit:{type:<|\"|>INTEGER<|\"|>}},required:[<|\"|>key<|"
                        "\"|>],type:<|\"|>OBJECT<|\"|>},response:{description:<|\"|>The "
                        "value<|\"|>,type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nLook up "
                        "x<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"));
  // Control: the first non-null type is what is printed, so reordering the union changes it.
  o.tools[0]["function"]["parameters"]["properties"]["limit"]["type"] = {"null", "number"};
  auto r2 = RenderChat(tmpl, msgs, o);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_NE(r2->find("limit:{type:<|\"|>NUMBER<|\"|>}"), std::string::npos) << *r2;
}

std::string ErrorOf(const std::string& src, const std::string& context = "{}") {
  auto t = jinja::Template::Parse(src);
  if (!t.ok()) return t.status().message();
  auto r = t->Render(ordered_json::parse(context));
  return r.ok() ? "rendered: " + *r : r.status().message();
}

TEST(JinjaErrors, UnknownConstructsNameTheTemplateLine) {
  EXPECT_EQ(ErrorOf("a\nb\n{% frobnicate x %}"),
            "template line 3: unknown statement '{% frobnicate %}'");
  EXPECT_EQ(ErrorOf("{{ x }}\n{{ x | shout }}"), "template line 2: unknown filter 'shout'");
  EXPECT_EQ(ErrorOf("\n\n{% if x is prime %}{% endif %}"), "template line 3: unknown test 'prime'");
  // trim_blocks joins these lines before lexing; the message still names the line as written.
  EXPECT_EQ(ErrorOf("{% if true %}\n{% endif %}\n\n{{ 1 + }}"),
            "template line 4: unexpected '}}' in an expression");
  EXPECT_EQ(ErrorOf("x\n{% for m in messages %}\n{{ m }}"),
            "template line 2: missing {% endfor %} for the 'for' opened on line 2");
  EXPECT_EQ(ErrorOf("{# open"), "template line 1: missing end of comment tag '#}'");
  EXPECT_NE(ErrorOf("{% raw %}x{% endraw %}").find("unknown statement '{% raw %}'"),
            std::string::npos);
  // Hostile nesting is an error, not a stack overflow.
  EXPECT_NE(ErrorOf("{{ " + std::string(100000, '(') + "1").find("nested too deeply"),
            std::string::npos);
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{% if true %}";
  EXPECT_NE(ErrorOf(deep).find("nested too deeply"), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsNameTheTemplateLine) {
  EXPECT_EQ(ErrorOf("ok\n\n{{ nothing() }}"),
            "template line 3: 'nothing' is not callable (it is an undefined value)");
  EXPECT_EQ(ErrorOf("{% for m in messages %}\n{{ m.content | trim }}\n{% endfor %}",
                    R"({"messages": [{"content": 1}]})"),
            "template line 2: filter 'trim' cannot apply to an integer");
  EXPECT_EQ(ErrorOf("\n{{ raise_exception('Only user and assistant roles') }}"),
            "template line 2: the template raised an exception: Only user and assistant roles");
  EXPECT_EQ(ErrorOf("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
            "template line 1: macro 'f' nests deeper than 256 calls");
}

}  // namespace
}  // namespace lockstep::tokenizer

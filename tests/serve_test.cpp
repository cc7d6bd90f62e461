// `lockstep serve` with the default pair: 32 concurrent mixed requests each byte-identical to the
// same request alone (with a negative control), streaming equal to whole responses, logprobs,
// and the info routes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;

std::string ModelPath(const char* role) {
  return fmt::format("{}/models/lockstep-code-{}.gguf", LOCKSTEP_SOURCE_DIR, role);
}

bool HavePair() {
  return std::filesystem::exists(ModelPath("target")) &&
         std::filesystem::exists(ModelPath("assistant"));
}

// One server for the whole suite: loading is the slow part, and requests are independent.
class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HavePair()) return;
    testing::ServeSetup s;
    s.model = ModelPath("target");
    s.draft = ModelPath("assistant");
    s.parallel = 8;
    s.ctx = 512;
    s.config.max_queue = 64;
    std::ifstream tmpl(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/templates/gemma4.jinja");
    s.config.chat_template.assign(std::istreambuf_iterator<char>(tmpl), {});
    server_ = new testing::InProcessServer(s);
    error_ = new std::string(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete error_;
    server_ = nullptr;
    error_ = nullptr;
  }
  void SetUp() override {
    if (!HavePair()) GTEST_SKIP() << "no default pair under models/";
    ASSERT_TRUE(error_->empty()) << *error_;
  }
  static testing::InProcessServer* server_;
  static std::string* error_;
};
testing::InProcessServer* Serve::server_ = nullptr;
std::string* Serve::error_ = nullptr;

const char* const kPrompts[] = {"def fibonacci(n):",       "class Stack:\n    def __init__(self):",
                                "import os\nimport sys\n", "def add(a, b):",
                                "for i in range(10):",     "# sort a list\ndef sort(xs):",
                                "def main():\n",           "with open(path) as f:"};

struct Spec {
  json body;
  std::string path;
};

// Mixed requests: greedy and seeded sampling, with and without drafting, both routes, streamed
// or whole, different lengths and prompts.
std::vector<Spec> MixedSpecs(int n) {
  std::vector<Spec> specs;
  for (int i = 0; i < n; ++i) {
    json b = {{"prompt", kPrompts[i % 8]},
              {"temperature", i % 2 == 0 ? 0.0 : 0.9},
              {"seed", 100 + i / 2},
              {"top_k", i % 4 == 1 ? 20 : 0},
              {"speculative.n_max", (i / 4) % 2 == 0 ? 3 : 0},
              {"stream", i % 3 == 0}};
    const int n_tokens = 16 + (i * 7) % 24;
    const bool native = i % 5 != 4;
    if (native) {
      b["n_predict"] = n_tokens;
      b["return_tokens"] = true;
    } else {
      b["max_tokens"] = n_tokens;
    }
    specs.push_back({b, native ? "/completion" : "/v1/completions"});
  }
  return specs;
}

// What must be byte-identical: token ids (their sha256 for the OpenAI route) and text.
struct Outcome {
  std::string tokens, text;
  int status = 0;
  bool operator==(const Outcome& o) const { return tokens == o.tokens && text == o.text; }
};

Outcome Request(httplib::Client& c, const Spec& s) {
  Outcome out;
  auto res = testing::PostJson(c, s.path, s.body);
  if (!res) return out;
  out.status = res->status;
  const bool native = s.path == "/completion";
  if (!s.body.value("stream", false)) {
    const json j = json::parse(res->body, nullptr, false);
    out.tokens = native ? j["tokens"].dump() : j["identity"]["output_sha256"].dump();
    out.text =
        native ? j["content"].get<std::string>() : j["choices"][0]["text"].get<std::string>();
    return out;
  }
  json tokens = json::array();
  for (const json& e : testing::SseEvents(res->body)) {
    if (native) {
      for (const auto& t : e["tokens"]) tokens.push_back(t);
      out.text += e["content"].get<std::string>();
    } else {
      if (!e["choices"].empty()) out.text += e["choices"][0]["text"].get<std::string>();
      if (e.contains("identity")) out.tokens = e["identity"]["output_sha256"].dump();
    }
  }
  if (native) out.tokens = tokens.dump();
  return out;
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// True when /slots shows every slot idle within a second (a job ends at the next step).
bool SlotsIdle(const testing::InProcessServer& server) {
  for (int i = 0; i < 50; ++i) {
    bool busy = false;
    for (const json& s : json::parse(server.Client()->Get("/slots")->body))
      busy = busy || s["is_processing"].get<bool>();
    if (!busy) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_F(Serve, ConcurrentRequestsEqualEachAlone) {
  const std::vector<Spec> specs = MixedSpecs(32);
  auto client = server_->Client();
  std::vector<Outcome> solo;
  for (const Spec& s : specs) {
    solo.push_back(Request(*client, s));
    ASSERT_EQ(solo.back().status, 200) << s.body.dump();
    ASSERT_FALSE(solo.back().tokens.empty());
  }
  std::vector<Outcome> together(specs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); ++i)
    threads.emplace_back([&, i] {
      auto c = server_->Client();
      together[i] = Request(*c, specs[i]);
    });
  for (auto& t : threads) t.join();
  int same = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(together[i].status, 200);
    EXPECT_EQ(together[i], solo[i]) << specs[i].body.dump();
    same += together[i] == solo[i];
  }
  // Load: the same 32 again, all streamed; outputs equal, memory back where it was (the first
  // concurrent pass grew the allocator's per-thread arenas), every slot free.
  EXPECT_TRUE(SlotsIdle(*server_));
  const size_t rss_before = ResidentBytes();
  std::vector<Outcome> streamed(specs.size());
  threads.clear();
  for (size_t i = 0; i < specs.size(); ++i)
    threads.emplace_back([&, i] {
      Spec s = specs[i];
      s.body["stream"] = true;
      streamed[i] = Request(*server_->Client(), s);
    });
  for (auto& t : threads) t.join();
  int same_streamed = 0;
  for (size_t i = 0; i < specs.size(); ++i) same_streamed += streamed[i] == solo[i];
  EXPECT_EQ(same_streamed, static_cast<int>(specs.size()));
  const size_t rss_after = ResidentBytes();
  EXPECT_LE(rss_after, rss_before + rss_before / 10);
  EXPECT_TRUE(SlotsIdle(*server_));
  std::printf(
      "[ serve ] 32 concurrent streaming clients: %d identical to solo; RSS %.1f -> %.1f "
      "MiB\n",
      same_streamed, rss_before / 1048576.0, rss_after / 1048576.0);
  // Negative control: the comparison sees a change of seed (sampled requests) or of prompt.
  int differ = 0, controls = 0;
  for (size_t i = 0; i < specs.size(); i += 2) {
    Spec changed = specs[i + 1];  // sampled
    changed.body["seed"] = changed.body["seed"].get<int>() + 1000;
    differ += !(Request(*client, changed) == solo[i + 1]);
    Spec perturbed = specs[i];  // greedy
    perturbed.body["prompt"] = std::string(kPrompts[i % 8]) + " ";
    differ += !(Request(*client, perturbed) == solo[i]);
    controls += 2;
  }
  std::printf(
      "[ serve ] %zu concurrent requests: %d identical to solo; negative control: %d of "
      "%d changed requests differ\n",
      specs.size(), same, differ, controls);
  EXPECT_GE(differ, controls * 3 / 4);
  // Speculation never changes a token: the drafted and plain twins of a request agree.
  Spec plain = specs[0], drafted = specs[0];
  plain.body["speculative.n_max"] = 0;
  drafted.body["speculative.n_max"] = 3;
  EXPECT_EQ(Request(*client, plain), Request(*client, drafted));
}

TEST_F(Serve, StreamingEqualsWhole) {
  auto client = server_->Client();
  for (const char* path : {"/completion", "/v1/completions"}) {
    json body = {{"prompt", "def parse(line):"},
                 {"temperature", 0.7},
                 {"seed", 9},
                 {"max_tokens", 24},
                 {"n_predict", 24},
                 {"return_tokens", true}};
    Spec whole{body, path};
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    Spec streamed{body, path};
    const Outcome a = Request(*client, whole), b = Request(*client, streamed);
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a, b) << path;
  }
  json body = {{"prompt", "x = 1"},
               {"max_tokens", 8},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  auto res = testing::PostJson(*client, "/v1/completions", body);
  ASSERT_TRUE(res);
  int done = 0;
  const auto events = testing::SseEvents(res->body, &done);
  EXPECT_EQ(done, 1);
  ASSERT_GE(events.size(), 2u);
  EXPECT_TRUE(events.back()["choices"].empty());  // the usage chunk
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 8);
  EXPECT_NE(events[events.size() - 2]["choices"][0]["finish_reason"], nullptr);
}

TEST_F(Serve, StopStringsCutTheText) {
  auto client = server_->Client();
  json body = {{"prompt", "def fibonacci(n):"}, {"temperature", 0}, {"max_tokens", 48}};
  auto free_run = testing::PostJson(*client, "/v1/completions", body);
  ASSERT_TRUE(free_run);
  const std::string text = json::parse(free_run->body)["choices"][0]["text"];
  ASSERT_GE(text.size(), 8u);
  const std::string stop = text.substr(4, 3);
  body["stop"] = {stop};
  for (bool stream : {false, true}) {
    body["stream"] = stream;
    auto res = testing::PostJson(*client, "/v1/completions", body);
    ASSERT_TRUE(res);
    std::string got, finish;
    if (!stream) {
      const json j = json::parse(res->body);
      got = j["choices"][0]["text"];
      finish = j["choices"][0]["finish_reason"];
    } else {
      for (const json& e : testing::SseEvents(res->body))
        if (!e["choices"].empty()) {
          got += e["choices"][0]["text"].get<std::string>();
          if (!e["choices"][0]["finish_reason"].is_null())
            finish = e["choices"][0]["finish_reason"];
        }
    }
    EXPECT_EQ(got, text.substr(0, text.find(stop))) << "stream " << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(Serve, LogprobsDescribeTheChosenTokens) {
  auto client = server_->Client();
  json body = {{"prompt", "def add(a, b):"}, {"temperature", 0}, {"max_tokens", 12}};
  auto plain = testing::PostJson(*client, "/v1/completions", body);
  body["logprobs"] = 3;
  auto with = testing::PostJson(*client, "/v1/completions", body);
  ASSERT_TRUE(plain && with);
  const json a = json::parse(plain->body), b = json::parse(with->body);
  // Asking for logprobs changes no token.
  EXPECT_EQ(a["identity"]["output_sha256"], b["identity"]["output_sha256"]);
  const json& lp = b["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);
    double best = -1e300;
    for (auto& [piece, value] : lp["top_logprobs"][i].items())
      best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(chosen, best) << "greedy picks the most likely token";
  }
  json native = {{"prompt", "def add(a, b):"},
                 {"temperature", 0},
                 {"n_predict", 6},
                 {"n_probs", 2},
                 {"return_tokens", true}};
  auto n = testing::PostJson(*client, "/completion", native);
  ASSERT_TRUE(n);
  const json j = json::parse(n->body);
  ASSERT_EQ(j["completion_probabilities"].size(), 6u);
  EXPECT_EQ(j["completion_probabilities"][0]["id"], j["tokens"][0]);
  EXPECT_EQ(j["completion_probabilities"][0]["top_logprobs"].size(), 2u);
}

TEST_F(Serve, NativeCompletionReportsDraftTimings) {
  auto client = server_->Client();
  const std::vector<int32_t> prompt = server_->tokenizer()->Encode("def add(a, b):");
  json body = {{"prompt", prompt}, {"n_predict", 32}, {"temperature", 0}, {"return_tokens", true}};
  auto res = testing::PostJson(*client, "/completion", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  EXPECT_EQ(j["tokens_evaluated"], prompt.size());
  EXPECT_TRUE(j["timings"].contains("draft_n"));
  EXPECT_GT(j["timings"]["draft_n"].get<int>(), 0);
  EXPECT_LE(j["timings"]["draft_n_accepted"].get<int>(), j["timings"]["draft_n"].get<int>());
  EXPECT_EQ(j["timings"]["predicted_n"], j["tokens"].size());
  EXPECT_EQ(j["identity"]["settings"]["seed"].is_number(), true);
  // Without draft_rounds the response has none; with it, the rounds add up to the counters.
  EXPECT_FALSE(j.contains("draft_rounds"));
  body["draft_rounds"] = true;
  const json r = json::parse(testing::PostJson(*client, "/completion", body)->body);
  EXPECT_EQ(r["tokens"], j["tokens"]);
  int drafted = 0, accepted = 0;
  for (const json& round : r["draft_rounds"]) {
    EXPECT_LT(round[0].get<size_t>(), r["tokens"].size());
    drafted += round[1].get<int>();
    accepted += round[2].get<int>();
  }
  EXPECT_EQ(drafted, r["timings"]["draft_n"]);
  EXPECT_EQ(accepted, r["timings"]["draft_n_accepted"]);
}

TEST_F(Serve, ChatStreamedEqualsWhole) {
  auto client = server_->Client();
  json body = {{"messages", {{{"role", "user"}, {"content", "Write a stack class."}}}},
               {"max_tokens", 12},
               {"temperature", 0.5},
               {"seed", 4}};
  auto whole = testing::PostJson(*client, "/v1/chat/completions", body);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json w = json::parse(whole->body);
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  body["stream"] = true;
  auto streamed = testing::PostJson(*client, "/v1/chat/completions", body);
  ASSERT_TRUE(streamed);
  int done = 0;
  const auto events = testing::SseEvents(streamed->body, &done);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const json& e : events)
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
      text += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, w["choices"][0]["message"]["content"]);
  EXPECT_EQ(events.back()["identity"]["output_sha256"], w["identity"]["output_sha256"]);
  EXPECT_EQ(done, 1);
  // /apply-template gives the text the chat request ran on.
  auto applied = testing::PostJson(*client, "/apply-template", {{"messages", body["messages"]}});
  ASSERT_TRUE(applied);
  const std::string prompt = json::parse(applied->body)["prompt"];
  EXPECT_NE(prompt.find("Write a stack class."), std::string::npos);
  EXPECT_EQ(w["usage"]["prompt_tokens"], server_->tokenizer()->Encode(prompt, false, true).size());
}

TEST_F(Serve, InfoRoutes) {
  auto client = server_->Client();
  auto health = client->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const json models = json::parse(client->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "test-model");
  const json props = json::parse(client->Get("/props")->body);
  EXPECT_EQ(props["total_slots"], 8);
  const json slots = json::parse(client->Get("/slots")->body);
  EXPECT_EQ(slots.size(), 8u);
  const std::string metrics = client->Get("/metrics")->body;
  EXPECT_NE(metrics.find("llamacpp:tokens_predicted_total"), std::string::npos);
  EXPECT_NE(metrics.find("lockstep:time_to_first_token_seconds_bucket"), std::string::npos);
  auto tok = testing::PostJson(*client, "/tokenize", {{"content", "def f(x):"}});
  const json ids = json::parse(tok->body)["tokens"];
  ASSERT_FALSE(ids.empty());
  auto detok = testing::PostJson(*client, "/detokenize", {{"tokens", ids}});
  EXPECT_EQ(json::parse(detok->body)["content"], "def f(x):");
  EXPECT_TRUE(json::parse(detok->body).contains("identity"));
  auto page = client->Get("/");
  EXPECT_NE(page->body.find("<title>lockstep</title>"), std::string::npos);
}

}  // namespace
}  // namespace lockstep

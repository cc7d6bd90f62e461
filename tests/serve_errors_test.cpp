// `lockstep serve` under bad input and bad clients: OpenAI-shaped 4xx errors, a flood of
// malformed requests while /health keeps answering, the API key, a full queue (429), client
// disconnects freeing their slot, and the command's --help and SIGTERM shutdown.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "testing/run_cli.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kKey = "test-key";

std::string ModelPath(const char* role) {
  return fmt::format("{}/models/lockstep-code-{}.gguf", LOCKSTEP_SOURCE_DIR, role);
}

// Sends raw bytes on a fresh connection and returns the response's status code, or 0 when the
// server closed the connection without one. Reads for at most `max_wait`, then hangs up (a request
// that happens to be valid and long is cancelled by the server when it notices).
int RawRequest(int port, const std::string& bytes, bool close_write = false,
               std::chrono::milliseconds max_wait = 3s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{0, 200000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (close_write) ::shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + max_wait;
  while (std::chrono::steady_clock::now() < until) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    if (n > 0) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (reply.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(reply.c_str() + 9);
}

std::string Http(const std::string& path, const std::string& body, bool auth = true) {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: "
      "{}\r\nConnection: close\r\n\r\n{}",
      path, auth ? fmt::format("Authorization: Bearer {}\r\n", kKey) : "", body.size(), body);
}

class ServeLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(ModelPath("target"))) return;
    testing::ServeSetup s;
    s.model = ModelPath("target");
    s.parallel = 1;
    s.ctx = 4096;
    s.config.api_key = kKey;
    s.config.max_queue = 1;
    s.config.max_body = 64 << 10;
    s.config.read_timeout_s = 1;
    server_ = new testing::InProcessServer(s);
    error_ = new std::string(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete error_;
  }
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath("target"))) GTEST_SKIP() << "no default model";
    ASSERT_TRUE(error_->empty()) << *error_;
  }
  std::unique_ptr<httplib::Client> Client() {
    auto c = server_->Client();
    c->set_bearer_token_auth(kKey);
    return c;
  }
  double Metric(const std::string& name) {
    const std::string text = Client()->Get("/metrics")->body;
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  bool SlotsIdle(std::chrono::milliseconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    do {
      bool busy = false;
      for (const auto& s : json::parse(Client()->Get("/slots")->body))
        busy |= s["is_processing"].get<bool>();
      if (!busy) return true;
      std::this_thread::sleep_for(20ms);
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }
  // A long streamed generation that reads until *stop, then drops the connection.
  std::thread LongStream(std::atomic<bool>* stop, std::atomic<int>* chunks, int* status) {
    return std::thread([this, stop, chunks, status] {
      auto c = Client();
      httplib::Request req;
      req.method = "POST";
      req.path = "/completion";
      req.headers = {{"Authorization", std::string("Bearer ") + kKey}};
      req.body =
          json{{"prompt", "def f():"}, {"n_predict", 4000}, {"ignore_eos", true}, {"stream", true}}
              .dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [stop, chunks](const char*, size_t, uint64_t, uint64_t) {
        ++*chunks;
        return !stop->load();
      };
      auto res = c->send(req);
      *status = res ? res->status : 0;
    });
  }
  static testing::InProcessServer* server_;
  static std::string* error_;
};
testing::InProcessServer* ServeLimits::server_ = nullptr;
std::string* ServeLimits::error_ = nullptr;

TEST_F(ServeLimits, ErrorsHaveTheOpenAiShape) {
  auto c = Client();
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{\"prompt\": ", 400, "not valid JSON"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 1.5})", 400, "top_p"},
      {"/v1/completions", R"({"prompt": "x", "typical_p": 0.5})", 400, "typical_p"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400, "exceeds the context"},
      {"/completion", R"({"prompt": "x", "max_tokens": 5000})", 400, "exceeds the context"},
      {"/v1/completions", json{{"prompt", std::vector<int>(4096, 5)}}.dump(), 400, "context"},
      {"/v1/completions", R"({"max_tokens": 5})", 400, "'prompt' is required"},
      {"/completion", R"({"prompt": [1, 99999]})", 400, "token id"},
      {"/v1/completions", R"({"prompt": "x", "logit_bias": {"5": 1}})", 400, "logit_bias"},
      {"/v1/completions", R"({"prompt": "x", "n": 2})", 400, "'n'"},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400, "messages"},
      {"/v1/completions", std::string(70000, ' '), 413, "--max-body"},
      {"/nowhere", "{}", 404, "no route"},
  };
  for (const Case& k : cases) {
    auto res = c->Post(k.path, k.body, "application/json");
    ASSERT_TRUE(res) << k.body.substr(0, 80);
    EXPECT_EQ(res->status, k.status) << k.body.substr(0, 80);
    const json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << res->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(k.says), std::string::npos)
        << j["error"]["message"];
    EXPECT_EQ(j["error"]["code"], k.status);
    EXPECT_TRUE(j["error"]["type"].is_string());
  }
  // Unknown fields are ignored.
  auto ok = c->Post("/v1/completions",
                    R"({"prompt": "x", "max_tokens": 2, "frobnicate": 1, "logit_bias": {}})",
                    "application/json");
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServeLimits, ApiKeyIsRequiredExceptForHealth) {
  auto anonymous = server_->Client();
  EXPECT_EQ(anonymous->Get("/health")->status, 200);
  EXPECT_EQ(anonymous->Get("/v1/models")->status, 401);
  anonymous->set_bearer_token_auth("wrong");
  EXPECT_EQ(anonymous->Get("/v1/models")->status, 401);
  EXPECT_EQ(Client()->Get("/v1/models")->status, 200);
}

TEST_F(ServeLimits, MalformedFloodWhileHealthAnswers) {
  std::vector<std::string> bodies = {"{",
                                     "}",
                                     "[1,2",
                                     "nul",
                                     "{\"prompt\": }",
                                     "\"text\"",
                                     "42",
                                     "[]",
                                     "{\"prompt\": \"\xff\xfe\"}",
                                     "{\"prompt\": \"a\xc3\"}"};
  for (const char* field : {"prompt", "max_tokens", "n_predict", "temperature", "top_k", "seed",
                            "stop", "n", "logprobs", "n_probs", "stream", "top_p", "min_p",
                            "messages", "stream_options", "speculative.n_max"})
    for (const char* value : {"\"str\"", "{}", "[1.5]", "1e300", "-1e300", "18446744073709551616",
                              "-2", "true", "[\"a\", 2]"})  // later keys win: the field is tested
      bodies.push_back(fmt::format(
          "{{\"prompt\": [1, 2], \"n_predict\": 2, \"max_tokens\": 2, \"{}\": {}}}", field, value));
  std::mt19937 rng(7);
  for (int i = 0; i < 40; ++i) {  // random bytes and truncated JSON
    std::string b =
        json{{"prompt", "x"}, {"max_tokens", 3}, {"n_predict", 3}, {"stop", {"a"}}}.dump();
    b.resize(rng() % b.size());
    for (int k = 0; k < 3; ++k)
      b.insert(b.begin() + static_cast<long>(rng() % (b.size() + 1)), static_cast<char>(rng()));
    bodies.push_back(b);
    std::string garbage(1 + rng() % 64, '\0');  // bytes that are almost never JSON
    for (char& c : garbage) c = static_cast<char>(rng());
    bodies.push_back(garbage);
  }
  int n = 0, health_ok = 0, health_checks = 0, refused = 0;
  const char* routes[] = {"/completion", "/v1/completions", "/v1/chat/completions", "/tokenize",
                          "/detokenize"};
  for (const std::string& b : bodies) {
    const int status = RawRequest(server_->port(), Http(routes[n % 5], b));
    // Some random mutations still parse into a valid request: those must succeed, not crash.
    const bool valid_json = json::accept(b);
    EXPECT_TRUE((status >= 400 && status < 500) || status == 0 || (valid_json && status == 200))
        << status << " for " << b;
    refused += status >= 400 || status == 0;
    if (++n % 10 == 0) {
      ++health_checks;
      health_ok +=
          RawRequest(server_->port(),
                     "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") == 200;
    }
  }
  // Nesting 200,000 arrays deep (400 KB, under the default body limit) used to crash the server
  // in the chat route's recursive copies: deep bodies are refused before parsing (30,000 levels
  // here, within this server's 64 KiB limit). 64 levels are still served.
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  for (const char* route : {"/v1/chat/completions", "/apply-template", "/v1/completions"}) {
    const std::string body =
        R"({"messages": [{"role": "user", "content": "hi"}], "prompt": "x", "tools": )" + deep +
        "}";
    EXPECT_EQ(RawRequest(server_->port(), Http(route, body)), 400) << route;
  }
  const std::string deepest_served = R"({"prompt": "x", "n_predict": 1, "extra": )" +
                                     std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_EQ(RawRequest(server_->port(), Http("/completion", deepest_served)), 200);
  // Transport-level abuse: truncated bodies, partial headers, a silent client, bad auth.
  for (int i = 0; i < 10; ++i) {
    const std::string full = Http("/completion", R"({"prompt": "abc", "n_predict": 2})");
    const int truncated = RawRequest(server_->port(), full.substr(0, full.size() - 5), true);
    EXPECT_TRUE(truncated == 0 || (truncated >= 400 && truncated < 500)) << truncated;
    const int partial = RawRequest(server_->port(), full.substr(0, 30 + i), true);
    EXPECT_EQ(partial, 0);
    const int no_key = RawRequest(server_->port(), Http("/completion", "{}", false));
    EXPECT_EQ(no_key, 401);
    refused += (truncated == 0 || truncated >= 400) + (partial == 0) + (no_key == 401);
    n += 3;
  }
  // A client that stops halfway through its headers is dropped: after --read-timeout (1 s here)
  // it gets 408 and its connection is closed (tests/serve_slowloris_test.cpp: trickling ones).
  const auto t0 = std::chrono::steady_clock::now();
  const int slow =
      RawRequest(server_->port(), "POST /completion HTTP/1.1\r\nHost: x\r\nContent-", false, 10s);
  EXPECT_TRUE(slow == 0 || (slow >= 400 && slow < 500)) << slow;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  refused += slow == 0 || slow >= 400;
  ++n;
  std::printf(
      "[ serve ] %d bad requests, %d of them malformed and refused with a 4xx or a closed "
      "connection (the rest valid: unknown fields are ignored); "
      "/health answered %d of %d checks\n",
      n, refused, health_ok, health_checks);
  EXPECT_GE(refused, 200);
  EXPECT_EQ(health_ok, health_checks);
  EXPECT_EQ(Client()->Get("/health")->status, 200);
}

TEST_F(ServeLimits, DisconnectFreesTheSlot) {
  const double cancelled = Metric("lockstep:requests_cancelled_total");
  std::atomic<bool> stop{false};
  std::atomic<int> chunks{0};
  int status = 0;
  std::thread t = LongStream(&stop, &chunks, &status);
  while (chunks.load() < 3) std::this_thread::sleep_for(5ms);
  stop = true;
  t.join();
  EXPECT_TRUE(SlotsIdle(5s));
  EXPECT_EQ(Metric("lockstep:requests_cancelled_total"), cancelled + 1);
  // A whole (non-streamed) request whose client gives up is noticed by the heartbeat.
  httplib::Request req;
  req.method = "POST";
  req.path = "/completion";
  req.headers = {{"Authorization", std::string("Bearer ") + kKey}};
  req.set_header("Content-Type", "application/json");
  req.body = json{{"prompt", "def g():"}, {"n_predict", 4000}, {"ignore_eos", true}}.dump();
  req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
  EXPECT_FALSE(Client()->send(req));  // hung up at the first heartbeat byte
  EXPECT_TRUE(SlotsIdle(6s));
  EXPECT_EQ(Metric("lockstep:requests_cancelled_total"), cancelled + 2);
}

TEST_F(ServeLimits, FullQueueGets429) {
  std::atomic<bool> stop{false};
  std::atomic<int> first{0}, second{0};
  int s1 = 0, s2 = 0;
  std::thread running = LongStream(&stop, &first, &s1);
  while (first.load() < 1) std::this_thread::sleep_for(5ms);
  std::thread queued = LongStream(&stop, &second, &s2);
  std::this_thread::sleep_for(300ms);  // the second request is now waiting for the one slot
  auto res =
      Client()->Post("/completion", R"({"prompt": "x", "n_predict": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "rate_limit_error");
  stop = true;
  running.join();
  queued.join();
  EXPECT_TRUE(SlotsIdle(5s));
  // The gauges follow: they used to keep the last finished request as processing.
  EXPECT_EQ(Metric("llamacpp:requests_processing"), 0);
  EXPECT_EQ(Metric("llamacpp:requests_deferred"), 0);
}

// --max-queue 0: no request waits, but one that finds a free slot is served (every request
// used to get 429).
TEST(ServeQueue, NoQueueStillServesFreeSlots) {
  if (!std::filesystem::exists(ModelPath("target"))) GTEST_SKIP() << "no default model";
  testing::ServeSetup s;
  s.model = ModelPath("target");
  s.parallel = 1;
  s.config.max_queue = 0;
  testing::InProcessServer server(s);
  ASSERT_EQ(server.Start(), "");
  for (int i = 0; i < 3; ++i) {
    auto res = server.Client()->Post("/completion", R"({"prompt": "x", "n_predict": 2})",
                                     "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
  }
}

// The command itself: --help, a real listening socket on a free port, SIGTERM exits 0.
TEST(ServeCli, HelpAndGracefulShutdown) {
  int rc = 0;
  const std::string help = testing::RunCli(LOCKSTEP_BINARY, "serve --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(help.find("--api-key"), std::string::npos);
  // Every option shows its default, as generate's and chat's do.
  EXPECT_NE(help.find("--parallel INT:INT in [1 - 256]=4"), std::string::npos) << help;
  EXPECT_NE(help.find("--spec-draft-n-max INT:INT in [1 - 32]=3"), std::string::npos) << help;
  EXPECT_NE(help.find("--prefill-chunk,--ubatch-size"), std::string::npos) << help;  // -ub
  if (!std::filesystem::exists(ModelPath("target"))) GTEST_SKIP() << "no default model";
  testing::ServeProcess p = testing::SpawnServe(
      LOCKSTEP_BINARY, {"-m", ModelPath("target"), "-c", "256", "-np", "2", "--no-hash"});
  ASSERT_GT(p.port, 0) << p.line;
  const int port = p.port;
  httplib::Client c("127.0.0.1", port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto gen = c.Post("/completion", R"({"prompt": "x", "n_predict": 4})", "application/json");
  EXPECT_EQ(gen->status, 200);
  // SIGTERM while a stream is running: the stream ends properly (its last event says it was
  // cancelled), then the process exits 0.
  std::string events;
  std::atomic<bool> started{false};
  std::thread streaming([&] {
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    req.set_header("Content-Type", "application/json");
    req.body = R"({"prompt": "x", "n_predict": 240, "ignore_eos": true, "stream": true})";
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      events.append(data, n);
      started = true;
      return true;
    };
    httplib::Client(("127.0.0.1"), port).send(req);
  });
  while (!started) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(testing::StopServe(p), 0);
  streaming.join();
  const auto parsed = testing::SseEvents(events);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.back()["stop"], true);
  EXPECT_EQ(parsed.back()["stop_type"], "cancelled") << parsed.back().dump();
}

}  // namespace
}  // namespace lockstep

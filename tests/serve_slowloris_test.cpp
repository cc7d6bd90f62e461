// `lockstep serve` against slow clients: a request head must arrive within --header-timeout
// (re-armed per keep-alive request) and stay within 100 lines and 64 KiB, and three times the
// HTTP thread pool of trickling clients starve no route, with negative controls (a long deadline
// keeps the trickler open; plain cpp-httplib is starved by the same clients), and GET /metrics
// counts each 408 and 431 once (a server that refused nothing counts 0).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/head_scan.h"
#include "testing/raw_http.h"
#include "testing/run_cli.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

using testing::ConnectLoopback;
using testing::ExpectedRefusals;
using testing::RawStatus;
using testing::ReadResponse;
using testing::Refusals;
using testing::Tricklers;

const std::string kHeadPrefix = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";

testing::ServeSetup ServerWithDeadline(double header_timeout_s) {
  testing::ServeSetup s = testing::OneSlotSetup();
  s.config.header_timeout_s = header_timeout_s;
  return s;
}

// The scanner finds the head's end exactly where httplib stops reading it.
TEST(ServeHead, ScannerEndsTheHeadWhereHttplibDoes) {
  using server::HeadScanner;
  using server::HeadState;
  const server::HeadLimits limits{100, 64 << 10};
  const std::string head = "GET /health HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n";
  HeadScanner whole(limits);
  EXPECT_EQ(whole.Scan(head + "{\"body\": 1}"), HeadState::kComplete);
  EXPECT_EQ(whole.head_size(), head.size());
  EXPECT_EQ(whole.header_lines(), 2u);
  HeadScanner trickled(limits);  // byte by byte: complete only at the last byte of the head
  for (size_t n = 1; n < head.size(); ++n)
    ASSERT_EQ(trickled.Scan(std::string_view(head).substr(0, n)), HeadState::kIncomplete) << n;
  EXPECT_EQ(trickled.Scan(head), HeadState::kComplete);
  EXPECT_EQ(trickled.head_size(), head.size());
  // A line without '\r' does not end the head (httplib skips it); a bare request line does.
  HeadScanner lf(limits);
  EXPECT_EQ(lf.Scan("GET / HTTP/1.1\r\nHost: x\n\n"), HeadState::kIncomplete);
  EXPECT_EQ(lf.Scan("GET / HTTP/1.1\r\nHost: x\n\n\r\n"), HeadState::kComplete);
  EXPECT_EQ(lf.header_lines(), 2u);
  HeadScanner bare(limits);
  EXPECT_EQ(bare.Scan("GET / HTTP/1.1\nHost: x\n\n"), HeadState::kComplete);
  EXPECT_EQ(bare.head_size(), 15u);
  // Limits: 100 header lines pass, the 101st is refused before the head ends; bytes likewise.
  std::string lines = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) lines += fmt::format("H{}: v\r\n", i);
  EXPECT_EQ(HeadScanner(limits).Scan(lines + "\r\n"), HeadState::kComplete);
  EXPECT_EQ(HeadScanner(limits).Scan(lines + "H: v\r\n"), HeadState::kTooLarge);
  std::string big = "GET / HTTP/1.1\r\nH: ";
  big += std::string((64 << 10) - big.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(big.size(), size_t{64 << 10});
  EXPECT_EQ(HeadScanner(limits).Scan(big), HeadState::kComplete);
  EXPECT_EQ(HeadScanner(limits).Scan("X" + big), HeadState::kTooLarge);
  EXPECT_EQ(HeadScanner(limits).Scan(std::string((64 << 10) + 1, 'a')), HeadState::kTooLarge);
  EXPECT_EQ(HeadScanner(limits).Scan(std::string(64 << 10, 'a')), HeadState::kIncomplete);
}

// One server with a 1 s header deadline for the cases that only need to talk to it.
class ServeSlowloris : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::DefaultTargetMissing()) return;
    server_ = new testing::InProcessServer(ServerWithDeadline(1.0));
    error_ = new std::string(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete error_;
    server_ = nullptr;
    error_ = nullptr;
  }
  void SetUp() override {
    if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
    ASSERT_TRUE(error_->empty()) << *error_;
  }
  static testing::InProcessServer* server_;
  static std::string* error_;
};
testing::InProcessServer* ServeSlowloris::server_ = nullptr;
std::string* ServeSlowloris::error_ = nullptr;

TEST_F(ServeSlowloris, TricklingHeadIsClosedAtTheDeadline) {
  Tricklers t(server_->port(), 1, kHeadPrefix, 200ms);
  const auto t0 = Clock::now();
  while (t.Open() > 0 && Since(t0) < 5) std::this_thread::sleep_for(10ms);
  const double closed = t.ClosedAfter(0);
  const std::string reply = t.Reply(0);  // 408, unless the close overtook it (a reset)
  std::printf(
      "[ serve ] a head trickled at 1 byte / 200 ms was closed after %.2f s "
      "(--header-timeout 1), %s\n",
      closed, reply.empty() ? "without a response" : reply.substr(0, 25).c_str());
  EXPECT_GE(closed, 0.95);
  EXPECT_LE(closed, 2.0);
  EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 408 ", 0) == 0) << reply;
  if (!reply.empty()) {
    EXPECT_NE(reply.find("--header-timeout"), std::string::npos) << reply;
  }
  EXPECT_EQ(RawStatus(server_->port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
}

// Two head tricklers closed at the deadline count header_timeout 2, then three oversized heads
// header_too_large 3, and no other reason moves (its own server: the shared one's counts depend
// on which tests ran before).
TEST_F(ServeSlowloris, RefusalsAreCountedInMetrics) {
  testing::InProcessServer server(ServerWithDeadline(1.0));
  ASSERT_EQ(server.Start(), "");
  const int port = server.port();
  EXPECT_EQ(Refusals(port), ExpectedRefusals());
  {
    Tricklers t(port, 2, kHeadPrefix, 200ms);
    const auto t0 = Clock::now();
    while (t.Open() > 0 && Since(t0) < 5) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(t.Open(), 0);
  }
  const std::string after_408 = Refusals(port);
  EXPECT_EQ(after_408, ExpectedRefusals({{"header_timeout", 2}}));
  std::string lines = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 101; ++i) lines += fmt::format("H{}: v\r\n", i);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(RawStatus(port, lines + "\r\n"), 431) << i;
  const std::string after_431 = Refusals(port);
  EXPECT_EQ(after_431, ExpectedRefusals({{"header_timeout", 2}, {"header_too_large", 3}}));
  std::printf("[ serve ] /metrics after 2 head tricklers: %s; after 3 oversized heads too: %s\n",
              after_408.c_str(), after_431.c_str());
}

// A slow client whose every head arrives within the deadline is served, on one keep-alive
// connection that lives longer than the deadline: the deadline is per request.
TEST_F(ServeSlowloris, SlowHeadsWithinTheDeadlineAreServed) {
  const int fd = ConnectLoopback(server_->port());
  ASSERT_GE(fd, 0);
  const auto t0 = Clock::now();
  for (int k = 0; k < 3; ++k) {
    const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    const auto sent = Clock::now();
    for (char c : req) {  // about 0.5 s a head
      ASSERT_EQ(::send(fd, &c, 1, MSG_NOSIGNAL), 1);
      std::this_thread::sleep_for(15ms);
    }
    std::string body;
    EXPECT_EQ(ReadResponse(fd, 3s, &body), 200) << "request " << k;
    EXPECT_EQ(json::parse(body, nullptr, false).value("status", ""), "ok") << body;
    std::printf("[ serve ] slow head %d: %zu bytes sent over %.2f s, answered\n", k, req.size(),
                Since(sent));
  }
  ::close(fd);
  EXPECT_GT(Since(t0), 1.2);  // the connection outlived one deadline
}

TEST_F(ServeSlowloris, OversizedHeadsGet431) {
  const std::string start = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  auto with = [&](int lines, size_t each) {
    std::string r = start;
    for (int i = 0; i < lines; ++i) r += fmt::format("H{:03}: {}\r\n", i, std::string(each, 'v'));
    return r + "\r\n";
  };
  // 100 header lines in all (Host and Connection included) pass; 101 do not.
  EXPECT_EQ(RawStatus(server_->port(), with(98, 1)), 200);
  std::string body;
  EXPECT_EQ(RawStatus(server_->port(), with(99, 1), &body), 431);
  EXPECT_EQ(json::parse(body, nullptr, false)["error"]["code"], 431) << body;
  // Under 64 KiB in all passes (each line under httplib's own 8 KiB limit); over it does not.
  EXPECT_LT(with(9, 7000).size(), size_t{64 << 10});
  EXPECT_EQ(RawStatus(server_->port(), with(9, 7000)), 200);
  EXPECT_GT(with(10, 7000).size(), size_t{64 << 10});
  EXPECT_EQ(RawStatus(server_->port(), with(10, 7000)), 431);
}

// Three times the HTTP thread pool of header tricklers, and two clients trickling a body (held in
// the intake until --body-timeout, 30 s by default: tests/serve_intake_test.cpp), while
// /health and a completion still answer at once; Stop then returns promptly with all of them
// connected, and closes them.
TEST_F(ServeSlowloris, TricklersDoNotStarveTheRoutes) {
  testing::InProcessServer server(ServerWithDeadline(30));
  ASSERT_EQ(server.Start(), "");
  constexpr int kWorkers = 10;
  Tricklers heads(server.port(), 3 * kWorkers, kHeadPrefix, 200ms);
  Tricklers bodies(server.port(), 2,
                   "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: 100000\r\n\r\n{\"prompt\": \"",
                   200ms);
  std::this_thread::sleep_for(600ms);
  auto c = server.Client();
  c->set_read_timeout(10, 0);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    auto res = c->Get("/health");
    const double took = Since(t0);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(took, 2.0);
    std::printf("[ serve ] /health with %d tricklers: %.3f s\n", 3 * kWorkers + 2, took);
  }
  const auto t0 = Clock::now();
  auto res = testing::PostJson(
      *c, "/v1/completions", {{"prompt", "def add(a, b):"}, {"max_tokens", 4}, {"temperature", 0}});
  const double took = Since(t0);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_LT(took, 5.0);
  std::printf("[ serve ] /v1/completions (4 tokens) with the tricklers: %.3f s\n", took);
  EXPECT_EQ(heads.Open(), 3 * kWorkers);  // they were all still connected meanwhile
  EXPECT_EQ(bodies.Open(), 2);
  const auto s0 = Clock::now();
  server.Stop();
  const double stop = Since(s0);
  std::printf("[ serve ] Stop with %d tricklers connected: %.3f s\n", heads.Open() + 2, stop);
  EXPECT_LT(stop, 2.0);
  const auto c0 = Clock::now();
  while ((heads.Open() > 0 || bodies.Open() > 0) && Since(c0) < 2)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(heads.Open(), 0);
  EXPECT_EQ(bodies.Open(), 0);
}

// Negative control of the deadline test: with --header-timeout 30 the same trickler is still
// connected when the deadline test's 2 s bound has passed.
TEST_F(ServeSlowloris, LongDeadlineKeepsTheTricklerNegativeControl) {
  testing::InProcessServer server(ServerWithDeadline(30));
  ASSERT_EQ(server.Start(), "");
  Tricklers t(server.port(), 1, kHeadPrefix, 200ms);
  std::this_thread::sleep_for(2100ms);
  EXPECT_EQ(t.Open(), 1);
  EXPECT_EQ(t.ClosedAfter(0), -1);
  // Nothing was refused, so the count the metrics test expects to be 2 is 0 here.
  const std::string refusals = Refusals(server.port());
  EXPECT_EQ(refusals, ExpectedRefusals());
  std::printf(
      "[ serve ] negative control: with --header-timeout 30 the trickler is open after "
      "2.1 s: %s; /metrics: %s\n",
      t.Open() == 1 ? "yes" : "no", refusals.c_str());
}

// Negative control of the starvation test: cpp-httplib's own server, with the same 10 threads
// and a 1 s read timeout, does not answer /health while the same 30 tricklers are connected.
TEST(ServeSlowlorisControl, PlainHttplibIsStarvedNegativeControl) {
  httplib::Server plain;
  plain.new_task_queue = [] { return new httplib::ThreadPool(10); };
  plain.set_read_timeout(1, 0);
  plain.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\": \"ok\"}", "application/json");
  });
  const int port = plain.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { plain.listen_after_bind(); });
  auto answered = [port] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(1, 500000);
    auto res = c.Get("/health");
    return res && res->status == 200;
  };
  EXPECT_TRUE(answered());  // it works at all
  bool starved = false;
  {
    Tricklers t(port, 30, kHeadPrefix, 200ms);
    std::this_thread::sleep_for(600ms);
    starved = !answered();
    EXPECT_EQ(t.Open(), 30);
  }  // the tricklers hang up, which frees httplib's threads
  EXPECT_TRUE(starved);
  std::printf(
      "[ serve ] negative control: plain cpp-httplib (10 threads) with 30 tricklers "
      "answered /health within 1.5 s: %s\n",
      starved ? "no" : "yes");
  plain.stop();
  listener.join();
}

TEST(ServeSlowlorisCli, HelpShowsTheHeaderTimeout) {
  int rc = 0;
  const std::string help = testing::RunCli(LOCKSTEP_BINARY, "serve --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(help.find("--header-timeout FLOAT:(FINITE) AND (FLOAT in [0.1 - 3600])=10"),
            std::string::npos)
      << help;
}

}  // namespace
}  // namespace lockstep

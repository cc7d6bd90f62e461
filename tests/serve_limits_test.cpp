// `lockstep serve`'s body deadline (--body-timeout: a trickled body gets 408 from the intake;
// bodies sent in pieces, chunked or up to --max-body within it are served) and its
// connection cap (--max-connections: the connection beyond it gets 503 + Retry-After at once),
// each with a negative control (a long deadline keeps the trickler; a high cap serves the 5th),
// and GET /metrics counts each refusal once (the controls count 0).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "testing/raw_http.h"
#include "testing/run_cli.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ConnectLoopback;
using testing::ExpectedRefusals;
using testing::RawStatus;
using testing::ReadResponse;
using testing::Refusals;
using testing::RefusalsIn;
using testing::Tricklers;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
// A whole head announcing a body of 1,000,000 bytes, and the body's first bytes.
const std::string kBodyPrefix =
    "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 1000000\r\n\r\n{\"prompt\": \"";
const std::string kCompletion = R"({"prompt": "def add(a, b):", "n_predict": 2, "temperature": 0})";

testing::ServeSetup Limited(double body_timeout_s, size_t max_connections = 256) {
  testing::ServeSetup s = testing::OneSlotSetup();
  s.config.body_timeout_s = body_timeout_s;
  s.config.max_connections = max_connections;
  return s;
}

std::string Head(const std::string& route, const std::string& framing) {
  return fmt::format("POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{}\r\n\r\n",
                     route, framing);
}

// Sends `pieces` on one connection, `gap` apart, and reads the response.
int SendInPieces(int port, const std::vector<std::string>& pieces, std::chrono::milliseconds gap,
                 std::string* body) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  for (const std::string& p : pieces) {
    ::send(fd, p.data(), p.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(gap);
  }
  const int status = ReadResponse(fd, 10s, body);
  ::close(fd);
  return status;
}

// A two-token greedy completion on a fresh connection: its status.
int Complete(int port) {
  std::string body;
  const int status = RawStatus(
      port,
      Head("/completion", fmt::format("Content-Length: {}", kCompletion.size())) + kCompletion,
      &body);
  EXPECT_EQ(status, 200) << body;
  return status;
}

// A body trickled at one byte per 200 ms (never silent for --read-timeout) gets 408 at
// --body-timeout 1 s, and the routes answer while it trickles and after.
TEST(ServeBody, TricklingBodyGets408AtTheDeadline) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(1.0));
  ASSERT_EQ(server.Start(), "");
  Tricklers t(server.port(), 1, kBodyPrefix, 200ms);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(RawStatus(server.port(), kHealth), 200);  // during
  EXPECT_EQ(t.Open(), 1);
  EXPECT_EQ(Complete(server.port()), 200);  // started during; may end after the deadline
  const auto t0 = Clock::now();
  while (t.Open() > 0 && Since(t0) < 5) std::this_thread::sleep_for(10ms);
  const double closed = t.ClosedAfter(0);
  const std::string reply = t.Reply(0);
  std::printf(
      "[ serve ] a body trickled at 1 byte / 200 ms got %s after %.2f s (--body-timeout 1)\n",
      reply.substr(0, reply.find('\r')).c_str(), closed);
  EXPECT_GE(closed, 0.95);
  EXPECT_LE(closed, 2.0);
  ASSERT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  const json error = json::parse(reply.substr(reply.find("\r\n\r\n") + 4), nullptr, false);
  EXPECT_EQ(error["error"]["code"], 408) << reply;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("--body-timeout"), std::string::npos)
      << reply;
  EXPECT_EQ(RawStatus(server.port(), kHealth), 200);  // after
  EXPECT_EQ(Complete(server.port()), 200);
}

// Negative control: with --body-timeout 30 the same trickler is still connected, unanswered,
// when the deadline test's 2 s bound has passed.
TEST(ServeBody, LongDeadlineKeepsTheTricklerNegativeControl) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(30));
  ASSERT_EQ(server.Start(), "");
  Tricklers t(server.port(), 1, kBodyPrefix, 200ms);
  std::this_thread::sleep_for(2100ms);
  EXPECT_EQ(t.Open(), 1);
  EXPECT_EQ(t.Reply(0), "");
  // Nothing was refused, so the count the metrics test expects to be 2 is 0 here.
  const std::string refusals = Refusals(server.port());
  EXPECT_EQ(refusals, ExpectedRefusals());
  std::printf(
      "[ serve ] negative control: with --body-timeout 30 the body trickler is open after "
      "2.1 s: %s; /metrics: %s\n",
      t.Open() == 1 ? "yes" : "no", refusals.c_str());
}

// Two body tricklers, both answered 408 at --body-timeout 1 s, count body_timeout 2 and nothing
// else.
TEST(ServeBody, BodyTimeoutsAreCountedInMetrics) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(1.0));
  ASSERT_EQ(server.Start(), "");
  EXPECT_EQ(Refusals(server.port()), ExpectedRefusals());
  Tricklers t(server.port(), 2, kBodyPrefix, 200ms);
  const auto t0 = Clock::now();
  while (t.Open() > 0 && Since(t0) < 5) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(t.Open(), 0);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(t.Reply(i).rfind("HTTP/1.1 408 ", 0), 0u) << t.Reply(i);
  const std::string refusals = Refusals(server.port());
  EXPECT_EQ(refusals, ExpectedRefusals({{"body_timeout", 2}}));
  std::printf("[ serve ] /metrics after 2 body tricklers got 408: %s\n", refusals.c_str());
}

// Bodies that arrive within the deadline work as before: in pieces, chunked in pieces, and one
// just under --max-body (1 MiB) sent whole.
TEST(ServeBody, BodiesWithinTheDeadlineAreServed) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(1.0));
  ASSERT_EQ(server.Start(), "");
  const std::string& b = kCompletion;
  const size_t q = b.size() / 4;
  std::string body;
  const auto t0 = Clock::now();
  EXPECT_EQ(SendInPieces(server.port(),
                         {Head("/completion", fmt::format("Content-Length: {}", b.size())),
                          b.substr(0, q), b.substr(q, q), b.substr(2 * q, q), b.substr(3 * q)},
                         150ms, &body),
            200)
      << body;
  const std::string content = json::parse(body, nullptr, false).value("content", "?");
  std::printf("[ serve ] a body in 4 pieces over 0.6 s: served in %.2f s\n", Since(t0));
  auto chunk = [](const std::string& s) { return fmt::format("{:x}\r\n{}\r\n", s.size(), s); };
  EXPECT_EQ(SendInPieces(server.port(),
                         {Head("/completion", "Transfer-Encoding: chunked"),
                          chunk(b.substr(0, 2 * q)), chunk(b.substr(2 * q)), "0\r\n\r\n"},
                         150ms, &body),
            200)
      << body;
  EXPECT_EQ(json::parse(body, nullptr, false).value("content", "!"), content);  // same greedy run
  // Unknown fields are ignored: a padded body just under the 1 MiB limit is read whole.
  std::string big = R"({"prompt": "x", "n_predict": 1, "pad": ")";
  big += std::string((1 << 20) - big.size() - 2, 'a') + "\"}";
  ASSERT_EQ(big.size(), size_t{1} << 20);
  EXPECT_EQ(
      RawStatus(server.port(),
                Head("/completion", fmt::format("Content-Length: {}", big.size())) + big, &body),
      200)
      << body.substr(0, 200);
}

// Opens four connections (a keep-alive client that asks /health, three idle), then a 5th that
// asks /health, twice: returns its status (503 both times with --max-connections 4). Either way
// the keep-alive one still answers, and gives `refusals` (RefusalsIn of its GET /metrics, asked
// while all four are open, so that request cannot be refused itself); and once an idle one
// closes a new connection is served.
int FifthConnectionStatus(const testing::InProcessServer& server, std::string* head,
                          std::string* refusals) {
  const int kept = ConnectLoopback(server.port());
  ::send(kept, kHealth.data(), kHealth.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadResponse(kept, 3s), 200);
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(ConnectLoopback(server.port()));
  std::this_thread::sleep_for(100ms);  // the listener has taken them
  std::string body;
  const auto t0 = Clock::now();
  const int fifth = RawStatus(server.port(), kHealth, &body, head);
  std::printf("[ serve ] 5th connection: HTTP %d after %.3f s\n", fifth, Since(t0));
  if (fifth == 503) {
    EXPECT_EQ(json::parse(body, nullptr, false)["error"]["code"], 503) << body;
  }
  EXPECT_EQ(RawStatus(server.port(), kHealth), fifth);         // the same again
  ::send(kept, kHealth.data(), kHealth.size(), MSG_NOSIGNAL);  // existing ones are unaffected
  EXPECT_EQ(ReadResponse(kept, 3s), 200);
  const std::string metrics = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ::send(kept, metrics.data(), metrics.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadResponse(kept, 3s, &body), 200);
  *refusals = RefusalsIn(body);
  std::printf("[ serve ] /metrics after two 5th connections: %s\n", refusals->c_str());
  ::close(idle[0]);
  int again = 0;  // the server notices the close at once; retry briefly to be safe
  for (int i = 0; i < 20 && again != 200; ++i, std::this_thread::sleep_for(50ms))
    again = RawStatus(server.port(), kHealth);
  EXPECT_EQ(again, 200);
  ::close(kept);
  for (size_t i = 1; i < idle.size(); ++i) ::close(idle[i]);
  return fifth;
}

TEST(ServeConnections, ConnectionBeyondTheCapGets503) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(30, 4));
  ASSERT_EQ(server.Start(), "");
  std::string head, refusals;
  EXPECT_EQ(FifthConnectionStatus(server, &head, &refusals), 503);
  EXPECT_NE(head.find("Retry-After: 1\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  EXPECT_EQ(refusals, ExpectedRefusals({{"max_connections", 2}}));
}

// Negative control: the same five connections with the default cap (256): the 5th is served.
TEST(ServeConnections, HighCapServesTheFifthNegativeControl) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(Limited(30));
  ASSERT_EQ(server.Start(), "");
  std::string head, refusals;
  EXPECT_EQ(FifthConnectionStatus(server, &head, &refusals), 200);
  EXPECT_EQ(refusals, ExpectedRefusals());
}

TEST(ServeLimitsCli, HelpShowsTheBodyTimeoutAndConnectionCap) {
  int rc = 0;
  const std::string help = testing::RunCli(LOCKSTEP_BINARY, "serve --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(help.find("--body-timeout FLOAT:(FINITE) AND (FLOAT in [0.1 - 3600])=30"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("--max-connections UINT:UINT in [1 - 1048576]=256"), std::string::npos)
      << help;
  EXPECT_NE(help.find("--max-connections-per-client UINT:UINT in [0 - 1048576]=64"),
            std::string::npos)
      << help;
}

}  // namespace
}  // namespace lockstep

// `lockstep serve`'s intake receives whole requests before any worker sees them: more body
// tricklers than HTTP workers starve no route and still get 408 at --body-timeout, and framing
// (100-continue, pipelining, bodies on GET, chunked, bad lengths) ends each request where
// httplib reads it; and --max-connections-per-client refuses one client's extra connections
// with 503 (counted in GET /metrics), per client, IPv4 and IPv6, with a no-limit control.
#include <gtest/gtest.h>
#include <poll.h>
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
#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ConnectLoopback;
using testing::ExpectedRefusals;
using testing::RawPost;
using testing::RawStatus;
using testing::ReadResponse;
using testing::Refusals;
using testing::RefusalsIn;
using testing::Tricklers;

constexpr int kWorkers = 10;  // HTTP workers of ServerSetup(): 1 slot + 1 queued + 8
const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string kNothingRefused = ExpectedRefusals();
// A whole head announcing a 1,000-byte body, and the body's first bytes.
const std::string kBodyHead =
    "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 1000\r\n\r\n{\"prompt\": \"";

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

testing::ServeSetup ServerSetup(double body_timeout_s, size_t per_client = 64) {
  testing::ServeSetup s = testing::OneSlotSetup();
  s.config.body_timeout_s = body_timeout_s;
  s.config.max_connections_per_client = per_client;
  return s;
}

// Sends `bytes` on a fresh connection and returns everything the server sends until it closes
// the connection (or `wait` passes).
std::string Exchange(int port, const std::string& bytes, std::chrono::milliseconds wait = 3s) {
  const int fd = ConnectLoopback(port);
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string in;
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return in;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// More body tricklers than workers, with --body-timeout 30: when workers read bodies, each held
// one until the deadline and /health waited 30 s behind them; now it answers within 1 s.
TEST(ServeIntake, BodyTricklersBeyondTheWorkersStarveNoRoute) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(30));
  ASSERT_EQ(server.Start(), "");
  Tricklers t(server.port(), kWorkers + 4, kBodyHead, 200ms);
  std::this_thread::sleep_for(400ms);  // every head is in; the bodies are trickling
  for (int i = 0; i < 3; ++i) {
    const int fd = ConnectLoopback(server.port());
    const auto t0 = Clock::now();
    ::send(fd, kHealth.data(), kHealth.size(), MSG_NOSIGNAL);
    EXPECT_EQ(ReadResponse(fd, 1s), 200) << "GET /health " << i << " not answered within 1 s";
    std::printf("[ serve ] /health with %d body tricklers (%d workers): %.3f s\n", kWorkers + 4,
                kWorkers, Since(t0));
    ::close(fd);
  }
  const std::string completion =
      R"({"prompt": "def add(a, b):", "n_predict": 2, "temperature": 0})";
  std::string body;
  EXPECT_EQ(RawStatus(server.port(), RawPost("/completion", completion), &body), 200) << body;
  EXPECT_EQ(t.Open(), kWorkers + 4);  // all still connected, none answered
  for (int i = 0; i < kWorkers + 4; ++i) EXPECT_EQ(t.Reply(i), "") << i;
  EXPECT_EQ(Refusals(server.port()), kNothingRefused);
}

// The same tricklers with --body-timeout 1: every one gets 408 at the deadline (each measured
// from its own head's end, none waiting for a worker first), counted once each.
TEST(ServeIntake, BodyTricklersBeyondTheWorkersGet408AtTheDeadline) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(1.0));
  ASSERT_EQ(server.Start(), "");
  constexpr int kTricklers = kWorkers + 4;
  Tricklers t(server.port(), kTricklers, kBodyHead, 200ms);
  const auto t0 = Clock::now();
  while (t.Open() > 0 && Since(t0) < 5) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(t.Open(), 0);
  double first = 1e9, last = 0;
  for (int i = 0; i < kTricklers; ++i) {
    const std::string reply = t.Reply(i);
    ASSERT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << i << ": " << reply;
    const json error = json::parse(reply.substr(reply.find("\r\n\r\n") + 4), nullptr, false);
    EXPECT_NE(error["error"]["message"].get<std::string>().find("--body-timeout"),
              std::string::npos)
        << reply;
    first = std::min(first, t.ClosedAfter(i));
    last = std::max(last, t.ClosedAfter(i));
  }
  std::printf("[ serve ] %d body tricklers (%d workers) got 408 after %.2f to %.2f s\n", kTricklers,
              kWorkers, first, last);
  EXPECT_GE(first, 0.95);
  EXPECT_LE(last, 1.6);
  EXPECT_EQ(Refusals(server.port()), ExpectedRefusals({{"body_timeout", kTricklers}}));
  EXPECT_EQ(RawStatus(server.port(), kHealth), 200);
}

// A client that asks for 100 Continue gets exactly one, before it sends its body (httplib's own
// second one is not sent); an oversized one gets 413 at once instead and the connection closes.
TEST(ServeIntake, ExpectContinueGetsOneInterimResponse) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(5));
  ASSERT_EQ(server.Start(), "");
  const std::string body = R"({"content": "hello"})";
  const int fd = ConnectLoopback(server.port());
  const std::string head = fmt::format(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: "
      "{}\r\n\r\n",
      body.size());
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadResponse(fd, 1s), 100);
  ::send(fd, body.data(), body.size(), MSG_NOSIGNAL);
  std::string reply;
  EXPECT_EQ(ReadResponse(fd, 3s, &reply), 200) << "a second 100, or no answer";
  EXPECT_TRUE(json::parse(reply, nullptr, false).contains("tokens")) << reply;
  ::close(fd);
  const std::string big = Exchange(
      server.port(),
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n"
      "\r\n");
  EXPECT_EQ(big.rfind("HTTP/1.1 413 ", 0), 0u) << big;
  EXPECT_NE(big.find("Connection: close"), std::string::npos) << big;
}

// Each request ends where its framing says, so the next one on the connection is read right:
// pipelined requests, a GET's body (httplib reads none), an oversized body (received, dropped,
// 413), and chunked bodies are each followed by a request that is answered.
TEST(ServeIntake, RequestsEndWhereTheirFramingSays) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(5));
  ASSERT_EQ(server.Start(), "");
  const std::string tokenize = RawPost("/tokenize", R"({"content": "hi"})");
  const std::string last = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const std::string get_with_body =
      "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nxxxxx";
  const std::string oversized = RawPost("/tokenize", std::string(1200000, ' '));
  const std::string chunked =
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\n{\"con\r\n11\r\ntent\": \"chunked\"}\r\n0\r\n\r\n";
  const struct {
    const char* what;
    std::string bytes;
    int ok, too_large;
  } cases[] = {
      {"pipelined", tokenize + tokenize + last, 3, 0},
      {"GET with a body", get_with_body + last, 2, 0},
      {"oversized body", oversized + last, 1, 1},
      {"chunked", chunked + chunked + last, 3, 0},
  };
  for (const auto& c : cases) {
    const std::string reply = Exchange(server.port(), c.bytes);
    EXPECT_EQ(Count(reply, "HTTP/1.1 200 "), static_cast<size_t>(c.ok)) << c.what << "\n" << reply;
    EXPECT_EQ(Count(reply, "HTTP/1.1 413 "), static_cast<size_t>(c.too_large)) << c.what;
    EXPECT_EQ(Count(reply, "HTTP/1.1 "), static_cast<size_t>(c.ok + c.too_large)) << c.what;
  }
}

// Framing the intake and httplib could read differently is refused before any route, as is a
// chunked body over --max-body (which httplib 0.11 did not limit).
TEST(ServeIntake, AmbiguousFramingIsRefused) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(5));
  ASSERT_EQ(server.Start(), "");
  const std::string te = "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ";
  const struct {
    std::string bytes;
    int status;
    const char* says;
  } cases[] = {
      {"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n{}", 400,
       "Content-Length"},
      {"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
       400, "conflicting"},
      {te + "gzip\r\n\r\n", 501, "gzip"},
      {te + "chunked\r\n\r\nzz\r\n", 400, "chunk size"},
      {te + "chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n", 400, "trailer"},
      {te + "chunked\r\n\r\n200000\r\n", 413, "--max-body"},
  };
  for (const auto& c : cases) {
    std::string body;
    EXPECT_EQ(RawStatus(server.port(), c.bytes, &body), c.status) << c.bytes;
    const json error = json::parse(body, nullptr, false);
    EXPECT_EQ(error["error"]["code"], c.status) << body;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(c.says), std::string::npos) << body;
  }
  EXPECT_EQ(RawStatus(server.port(), kHealth), 200);
}

// Opens `limit` connections from 127.0.0.1 (one keep-alive that asks /health, the rest idle),
// then one more: its status, head and body. The keep-alive one then gets /metrics: `refusals`.
// After an idle one closes, a new connection must be served.
int OneBeyond(int port, int limit, std::string* head, std::string* body, std::string* refusals) {
  const int kept = ConnectLoopback(port);
  ::send(kept, kHealth.data(), kHealth.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadResponse(kept, 3s), 200);
  std::vector<int> idle;
  for (int i = 1; i < limit; ++i) idle.push_back(ConnectLoopback(port));
  std::this_thread::sleep_for(100ms);  // the listener has taken them
  const int status = RawStatus(port, kHealth, body, head);
  const std::string metrics = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ::send(kept, metrics.data(), metrics.size(), MSG_NOSIGNAL);
  std::string text;
  EXPECT_EQ(ReadResponse(kept, 3s, &text), 200);
  *refusals = RefusalsIn(text);
  ::close(idle.at(0));
  int again = 0;  // the server notices the close at once; retry briefly to be safe
  for (int i = 0; i < 20 && again != 200; ++i, std::this_thread::sleep_for(50ms))
    again = RawStatus(port, kHealth);
  EXPECT_EQ(again, 200);
  ::close(kept);
  for (size_t i = 1; i < idle.size(); ++i) ::close(idle[i]);
  return status;
}

TEST(ServeClientCap, ConnectionBeyondTheLimitFromOneAddressGets503) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(30, 3));
  ASSERT_EQ(server.Start(), "");
  std::string head, body, refusals;
  EXPECT_EQ(OneBeyond(server.port(), 3, &head, &body, &refusals), 503);
  EXPECT_NE(head.find("Retry-After: 1\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  const json error = json::parse(body, nullptr, false);
  EXPECT_EQ(error["error"]["code"], 503) << body;
  EXPECT_NE(body.find("--max-connections-per-client 3"), std::string::npos) << body;
  EXPECT_NE(body.find("127.0.0.1"), std::string::npos) << body;
  EXPECT_EQ(refusals, ExpectedRefusals({{"max_connections_per_client", 1}}));
  std::printf("[ serve ] 4th connection from 127.0.0.1 at --max-connections-per-client 3: %s\n",
              refusals.c_str());
}

// Negative control: without a limit (0) the same 4th connection is served and nothing counted.
TEST(ServeClientCap, NoLimitServesTheFourthNegativeControl) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup(30, 0));
  ASSERT_EQ(server.Start(), "");
  std::string head, body, refusals;
  EXPECT_EQ(OneBeyond(server.port(), 3, &head, &body, &refusals), 200);
  EXPECT_EQ(refusals, kNothingRefused);
}

// On a dual-stack listener ("::") 127.0.0.1 and ::1 are two clients: with a limit of 1 each gets
// one connection and its second is refused, the message naming the client. The IPv4 client
// arrives as ::ffff:127.0.0.1 and is keyed (and named) as plain 127.0.0.1.
TEST(ServeClientCap, EachAddressIsCountedApartIpv4AndIpv6) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::ServeSetup s = ServerSetup(30, 1);
  s.config.host = "::";
  testing::InProcessServer server(s);
  if (!server.Start().empty()) GTEST_SKIP() << "no IPv6 listener here";
  const int v4 = ConnectLoopback(server.port());
  const int v6 = ConnectLoopback(server.port(), true);
  if (v4 < 0 || v6 < 0) GTEST_SKIP() << "no dual-stack loopback here";
  auto ask = [](int fd, std::string* body) {
    ::send(fd, kHealth.data(), kHealth.size(), MSG_NOSIGNAL);
    return ReadResponse(fd, 3s, body);
  };
  EXPECT_EQ(ask(v4, nullptr), 200);
  EXPECT_EQ(ask(v6, nullptr), 200);
  for (bool ipv6 : {false, true}) {
    const int second = ConnectLoopback(server.port(), ipv6);
    std::string body;
    EXPECT_EQ(ask(second, &body), 503) << ipv6;
    EXPECT_NE(body.find(ipv6 ? "from ::1 " : "from 127.0.0.1 "), std::string::npos) << body;
    ::close(second);
  }
  EXPECT_EQ(ask(v4, nullptr), 200);  // the first ones are unaffected
  EXPECT_EQ(ask(v6, nullptr), 200);
  ::close(v4);
  ::close(v6);
}

}  // namespace
}  // namespace lockstep

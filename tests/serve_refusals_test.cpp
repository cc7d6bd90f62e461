// GET /metrics counts each refusal of a request before any route once, under its reason in
// lockstep:requests_refused_total: 413 over --max-body (chunked or Content-Length, sent or
// awaiting 100 Continue), 400 for framing the intake will not read, 400 for a malformed chunked
// body, 501 for another transfer coding; never also as a 4xx rejection, and a 401 answered
// first is no 413. Negative controls: served and route-rejected requests move no reason, and
// the comparison fails when it reads a reason other than the one refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "testing/raw_http.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

using nlohmann::json;
using testing::ExpectedRefusals;
using testing::MetricValue;
using testing::RawPost;
using testing::RawStatus;
using testing::RefusalCount;
using testing::RefusalReasons;
using testing::Refusals;

constexpr size_t kMaxBody = 64 << 10;
const std::string kChunkedHead =
    "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

testing::ServeSetup ServerSetup(const std::string& api_key = "") {
  testing::ServeSetup s = testing::OneSlotSetup();
  s.config.max_body = kMaxBody;
  s.config.api_key = api_key;
  return s;
}

// Every counter a refusal could move: each refusal reason, and the routes' rejections (where a
// double count would show). A series missing from the text reads -1.
using Counters = std::map<std::string, int64_t>;

Counters CountersIn(const std::string& metrics) {
  Counters c;
  for (const std::string& reason : RefusalReasons()) c[reason] = RefusalCount(metrics, reason);
  c["rejected_4xx"] = MetricValue(metrics, "lockstep:requests_rejected_4xx_total");
  c["rejected_5xx"] = MetricValue(metrics, "lockstep:requests_rejected_5xx_total");
  return c;
}

// GET /metrics; `auth` is a header line (with its CRLF) for a server with --api-key.
std::string MetricsText(int port, const std::string& auth = "") {
  std::string body;
  EXPECT_EQ(RawStatus(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", &body), 200);
  return body;
}

Counters Read(int port, const std::string& auth = "") {
  return CountersIn(MetricsText(port, auth));
}

// "" when counter `raised` went up by exactly 1 from `before` to `after` and every other one
// stayed; else what differs ("bad_framing 0 -> 0 (want 1); "), or that `raised` is no counter.
std::string OnlyRaised(const Counters& before, const Counters& after, const std::string& raised) {
  std::string wrong;
  const auto found = after.find(raised);
  if (found == after.end() || found->second < 0) wrong += fmt::format("no counter '{}'; ", raised);
  for (const auto& [name, value] : after) {
    const auto b = before.find(name);
    const int64_t was = b == before.end() ? -1 : b->second;
    const int64_t want = was + (name == raised ? 1 : 0);
    if (was < 0 || value != want)
      wrong += fmt::format("{} {} -> {} (want {}); ", name, was, value, want);
  }
  return wrong;
}

struct Refusal {
  const char* what;
  std::string bytes;
  int status;
  const char* reason;
};

std::vector<Refusal> RefusedRequests() {
  return {
      {"a chunked body over --max-body", kChunkedHead + "100000\r\n", 413, "body_too_large"},
      {"a Content-Length body over --max-body, sent (httplib's 413)",
       RawPost("/tokenize", std::string(kMaxBody + 1, ' ')), 413, "body_too_large"},
      {"a Content-Length over --max-body awaiting 100 Continue (httplib's 413)",
       "POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n"
       "\r\n",
       413, "body_too_large"},
      {"a Content-Length that is not digits",
       "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n{}", 400, "bad_framing"},
      {"conflicting Content-Lengths",
       "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
       400, "bad_framing"},
      {"two Transfer-Encoding headers",
       "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       400, "bad_framing"},
      {"a chunk size that is not hex", kChunkedHead + "zz\r\n", 400, "malformed_chunked_body"},
      {"trailer fields", kChunkedHead + "2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n", 400,
       "malformed_chunked_body"},
      {"Transfer-Encoding: gzip",
       "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
       "unsupported_transfer_encoding"},
  };
}

// Each refusal moves its own reason by exactly 1 and nothing else, requests_rejected_4xx_total
// included (httplib's 413 goes through the error handler that counts rejections).
TEST(ServeRefusals, EachRefusalIsCountedOnceUnderItsReason) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup());
  ASSERT_EQ(server.Start(), "");
  const int port = server.port();
  EXPECT_EQ(Refusals(port), ExpectedRefusals());
  for (const Refusal& r : RefusedRequests()) {
    const Counters before = Read(port);
    std::string body;
    EXPECT_EQ(RawStatus(port, r.bytes, &body), r.status) << r.what;
    EXPECT_EQ(json::parse(body, nullptr, false)["error"]["code"], r.status)
        << r.what << ": " << body;
    EXPECT_EQ(OnlyRaised(before, Read(port), r.reason), "") << r.what;
  }
  const std::string counted = Refusals(port);
  EXPECT_EQ(counted, ExpectedRefusals({{"body_too_large", 3},
                                       {"bad_framing", 3},
                                       {"malformed_chunked_body", 2},
                                       {"unsupported_transfer_encoding", 1}}));
  std::printf("[ serve ] /metrics after %zu refused requests: %s\n", RefusedRequests().size(),
              counted.c_str());
}

// httplib answers the pre-routing handler's 401 before it reads a body, so an unauthorized
// oversized request is a 401 (a rejection), not a 413; with the key it is a 413 (a refusal).
// Counting at the intake, which cannot know the answer, would have counted both as too large.
TEST(ServeRefusals, An401AnsweredFirstIsNotCountedAsTooLarge) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup("secret"));
  ASSERT_EQ(server.Start(), "");
  const int port = server.port();
  const std::string oversized(kMaxBody + 1, ' ');
  const std::string key = "Authorization: Bearer secret\r\n";
  Counters before = Read(port, key);
  EXPECT_EQ(RawStatus(port, RawPost("/tokenize", oversized)), 401);
  EXPECT_EQ(OnlyRaised(before, Read(port, key), "rejected_4xx"), "");
  before = Read(port, key);
  EXPECT_EQ(RawStatus(port, RawPost("/tokenize", oversized, key)), 413);
  EXPECT_EQ(OnlyRaised(before, Read(port, key), "body_too_large"), "");
}

// Negative controls. Requests served (a chunked body, and a Content-Length body of exactly
// --max-body) move no counter, so "raised by 1" fails for every reason; a route's 400 moves
// only requests_rejected_4xx_total, so the check would see a refusal counted twice; and after a
// real bad-framing refusal the comparison fails when it is given another reason, a name that
// is no reason, or metrics text whose series was renamed.
TEST(ServeRefusals, UnrefusedRequestsAndOtherReasonsFailTheCheckNegativeControl) {
  if (testing::DefaultTargetMissing()) GTEST_SKIP() << "no default model";
  testing::InProcessServer server(ServerSetup());
  ASSERT_EQ(server.Start(), "");
  const int port = server.port();
  std::string padded = R"({"content": "hi"})";
  padded += std::string(kMaxBody - padded.size(), ' ');
  const std::string served[] = {kChunkedHead + "11\r\n{\"content\": \"hi\"}\r\n0\r\n\r\n",
                                RawPost("/tokenize", padded)};
  for (const std::string& bytes : served) {
    const Counters before = Read(port);
    EXPECT_EQ(RawStatus(port, bytes), 200);
    const Counters after = Read(port);
    EXPECT_EQ(after, before);
    for (const std::string& reason : RefusalReasons())
      EXPECT_NE(OnlyRaised(before, after, reason), "") << reason << " passed with no refusal";
  }
  Counters before = Read(port);
  EXPECT_EQ(RawStatus(port, RawPost("/tokenize", "not json")), 400);
  EXPECT_EQ(OnlyRaised(before, Read(port), "rejected_4xx"), "");

  before = Read(port);
  EXPECT_EQ(RawStatus(port, RawPost("/tokenize", "{}", "Content-Length: 3\r\n")),
            400);  // conflicting lengths
  const std::string metrics = MetricsText(port);
  const Counters after = CountersIn(metrics);
  EXPECT_EQ(OnlyRaised(before, after, "bad_framing"), "");  // the real reason passes
  const std::string other = OnlyRaised(before, after, "malformed_chunked_body");
  const std::string unknown = OnlyRaised(before, after, "bad_framings");
  std::string renamed = metrics;
  const std::string label = "reason=\"bad_framing\"";
  ASSERT_NE(renamed.find(label), std::string::npos);
  renamed.replace(renamed.find(label), label.size(), "reason=\"bad_framing_x\"");
  const std::string misread = OnlyRaised(before, CountersIn(renamed), "bad_framing");
  EXPECT_NE(other, "");
  EXPECT_NE(unknown, "");
  EXPECT_NE(misread, "");
  EXPECT_EQ(RefusalCount(metrics, "bad_framings"), -1);
  std::printf(
      "[ serve ] negative control: another reason: %s\n  no such reason: %s\n  renamed "
      "series: %s\n",
      other.c_str(), unknown.c_str(), misread.c_str());
  EXPECT_EQ(Refusals(port), ExpectedRefusals({{"bad_framing", 1}}));
  EXPECT_EQ(ExpectedRefusals({{"bad_framings", 1}}), "unknown reason 'bad_framings'");
}

}  // namespace
}  // namespace lockstep

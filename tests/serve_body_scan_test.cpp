// The intake's request framing: which body a head declares, where a Content-Length or chunked
// body ends (byte by byte, as a trickled body arrives), what is refused, and the per-address
// connection counts that drop an address once its last connection closes.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/body_scan.h"
#include "server/connection.h"

namespace lockstep {
namespace {

using server::BodyScanner;
using server::BodyState;
using server::Framing;
using server::ParseFraming;

Framing Parsed(const std::string& headers) {
  const Expected<Framing> f = ParseFraming("POST / HTTP/1.1\r\n" + headers + "\r\n");
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? *f : Framing{};
}

std::string Refused(const std::string& headers) {
  const Expected<Framing> f = ParseFraming("POST / HTTP/1.1\r\n" + headers + "\r\n");
  return f.ok() ? "accepted" : f.status().message();
}

TEST(ServeFraming, HeadsDeclareTheirBodies) {
  EXPECT_EQ(Parsed("Host: x\r\n").kind, Framing::Kind::kNone);
  const Framing length = Parsed("content-length:  42 \r\n");
  EXPECT_EQ(length.kind, Framing::Kind::kLength);
  EXPECT_EQ(length.length, 42u);
  EXPECT_EQ(Parsed("Content-Length: 7\r\nContent-Length: 7\r\n").length, 7u);  // same value
  EXPECT_EQ(Parsed("Transfer-Encoding: Chunked\r\nContent-Length: 9\r\n").kind,
            Framing::Kind::kChunked);  // as httplib: the coding wins
  const Framing gzip = Parsed("Transfer-Encoding: gzip, chunked\r\n");
  EXPECT_EQ(gzip.kind, Framing::Kind::kUnsupported);
  EXPECT_EQ(gzip.coding, "gzip, chunked");
  EXPECT_TRUE(Parsed("Expect: 100-Continue\r\nContent-Length: 1\r\n").expect_continue);
  // httplib skips a line without its '\r', and a name with a space before the colon is another
  // name: neither declares a body there, so neither does here.
  EXPECT_EQ(Parsed("Content-Length: 5\n").kind, Framing::Kind::kNone);
  EXPECT_EQ(Parsed("Content-Length : 5\r\n").kind, Framing::Kind::kNone);
  EXPECT_EQ(Parsed("Content-Length: 99999999999999999999999\r\n").length, uint64_t{1} << 62);
  for (const char* bad :
       {"Content-Length: 12abc\r\n", "Content-Length: -1\r\n", "Content-Length: %31\r\n",
        "Content-Length:\r\n", "Content-Length: 1, 1\r\n"})
    EXPECT_NE(Refused(bad).find("not a number"), std::string::npos) << bad;
  EXPECT_NE(Refused("Content-Length: 2\r\nContent-Length: 3\r\n").find("conflicting"),
            std::string::npos);
  EXPECT_NE(Refused("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n").find("more"),
            std::string::npos);
  // A bare request line is a whole head by itself (httplib answers it 400): no body.
  const Expected<Framing> bare = ParseFraming("GET / HTTP/1.1\n");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->kind, Framing::Kind::kNone);
}

// Feeds `body` one byte at a time: the state after each prefix must be kIncomplete until the
// last byte; returns the final state (and the scanner's wire size through `wire`).
BodyState Trickled(const Framing& f, const std::string& body, size_t max_body, size_t* wire) {
  BodyScanner scan(f, max_body);
  for (size_t n = 0; n < body.size(); ++n) {
    const BodyState s = scan.Scan(std::string_view(body).substr(0, n));
    if (s != BodyState::kIncomplete) return s;
  }
  const BodyState s = scan.Scan(body + "GET / HTTP/1.1\r\n");  // the next request follows
  *wire = scan.wire_size();
  return s;
}

TEST(ServeFraming, BodiesEndWhereHttplibReadsThem) {
  size_t wire = 0;
  Framing length{Framing::Kind::kLength, 5, false, ""};
  EXPECT_EQ(Trickled(length, "hello", 100, &wire), BodyState::kComplete);
  EXPECT_EQ(wire, 5u);
  EXPECT_EQ(BodyScanner(length, 4).Scan(""), BodyState::kTooLarge);
  const Framing chunked{Framing::Kind::kChunked, 0, false, ""};
  const std::string body = "5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n";
  EXPECT_EQ(Trickled(chunked, body, 100, &wire), BodyState::kComplete);
  EXPECT_EQ(wire, body.size());
  // 15 bytes decoded, 44 on the wire (at most twice the limit).
  EXPECT_EQ(Trickled(chunked, body, 14, &wire), BodyState::kTooLarge);
  EXPECT_EQ(Trickled(chunked, body, 15, &wire), BodyState::kTooLarge);
  EXPECT_EQ(Trickled(chunked, body, 22, &wire), BodyState::kComplete);
  // Framing that takes more than twice the limit on the wire: 1-byte chunks, long extensions.
  std::string padded;
  for (int i = 0; i < 8; ++i) padded += "1;" + std::string(100, 'e') + "\r\nx\r\n";
  EXPECT_EQ(Trickled(chunked, padded + "0\r\n\r\n", 400, &wire), BodyState::kTooLarge);
  EXPECT_EQ(Trickled(chunked, "FFFFFFFFFFFFFFFFFFFF\r\n", 1 << 20, &wire), BodyState::kTooLarge);
  for (const char* bad :
       {"zz\r\n", "0x5\r\nhello\r\n0\r\n\r\n", " 5\r\nhello\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n",
        "5\r\nhelloXY0\r\n\r\n", "0\r\nX-Trailer: 1\r\n\r\n"}) {
    BodyScanner scan(chunked, 100);
    EXPECT_EQ(scan.Scan(bad), BodyState::kMalformed) << bad;
    EXPECT_FALSE(scan.error().empty());
  }
  BodyScanner endless(chunked, 1 << 20);
  EXPECT_EQ(endless.Scan("1" + std::string(2000, '0')), BodyState::kMalformed);  // no line end
}

TEST(ServePeerCounts, AnAddressIsForgottenWithItsLastConnection) {
  server::PeerCounts counts;
  {
    std::vector<server::PeerSeat> seats;
    for (int i = 0; i < 3; ++i) {
      std::optional<server::PeerSeat> s = counts.Take("127.0.0.1", 3);
      ASSERT_TRUE(s.has_value()) << i;
      seats.push_back(std::move(*s));
    }
    EXPECT_FALSE(counts.Take("127.0.0.1", 3).has_value());
    EXPECT_TRUE(counts.Take("::1", 3).has_value());  // another address; its seat goes at once
    EXPECT_EQ(counts.Open("127.0.0.1"), 3u);
    EXPECT_EQ(counts.Addresses(), 1u);
    seats.pop_back();
    EXPECT_EQ(counts.Open("127.0.0.1"), 2u);
    EXPECT_TRUE(counts.Take("127.0.0.1", 3).has_value());
  }
  EXPECT_EQ(counts.Open("127.0.0.1"), 0u);
  EXPECT_EQ(counts.Addresses(), 0u);
}

}  // namespace
}  // namespace lockstep

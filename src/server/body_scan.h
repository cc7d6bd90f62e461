// Where a request's body ends in the bytes received after its head (Content-Length or chunked),
// read strictly enough that cpp-httplib 0.11 reads every accepted body the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace lockstep::server {

// How a request says where its body ends (RFC 9112 section 6).
struct Framing {
  enum class Kind { kNone, kLength, kChunked, kUnsupported };
  Kind kind = Kind::kNone;
  uint64_t length = 0;           // kLength: the body's bytes (saturates far above any limit)
  bool expect_continue = false;  // Expect: 100-continue: the client may wait for a 100 first
  std::string coding;            // kUnsupported: the Transfer-Encoding the client asked for
};

// The framing that `head` (a whole head, as HeadScanner delimits it) declares. Only header lines
// ending in CRLF count, as in httplib, which skips the others. The intake and httplib must agree
// on where each request ends, so what httplib would read its own way is an error (a 400): a
// Content-Length that is not plain digits (httplib takes strtoull's prefix, or 0), several that
// differ, several Transfer-Encoding lines (httplib reads the first). Transfer-Encoding wins over
// Content-Length, as in httplib and RFC 9112.
Expected<Framing> ParseFraming(std::string_view head);

enum class BodyState { kIncomplete, kComplete, kTooLarge, kMalformed };

// Incremental like HeadScanner: call Scan again, with the same object, each time more bytes have
// arrived; it resumes where it stopped. kTooLarge when the body (decoded) exceeds `max_body`, or
// a chunked body's framing makes it take more than twice that on the wire: the intake buffers the
// whole body, so its wire size must be bounded too.
class BodyScanner {
 public:
  BodyScanner(const Framing& framing, size_t max_body);

  // `bytes` starts at the body's first byte and may run past its end (into the next request).
  BodyState Scan(std::string_view bytes);

  // Bytes the body takes on the wire, chunk framing included; valid once Scan returned kComplete.
  size_t wire_size() const { return wire_size_; }
  // What is wrong with a malformed chunked body (for the 400); set with kMalformed.
  const std::string& error() const { return error_; }

 private:
  // Where a chunked body's scan is: a chunk's size line, its data, the CRLF after the data, or
  // the CRLF after the last (zero-size) chunk's line, which httplib requires (no trailer fields).
  enum class Part { kSizeLine, kData, kDataEnd, kLastEnd, kDone };

  BodyState ScanChunked(std::string_view bytes);
  BodyState Malformed(std::string message);

  Framing::Kind kind_;
  uint64_t length_;
  uint64_t max_body_;
  uint64_t max_wire_;
  Part part_ = Part::kSizeLine;
  size_t at_ = 0;            // body bytes scanned
  uint64_t chunk_left_ = 0;  // data bytes of the current chunk not yet scanned
  uint64_t decoded_ = 0;     // data bytes of all chunks so far
  size_t wire_size_ = 0;
  std::string error_;
};

}  // namespace lockstep::server

// Counts of the requests and connections the transport refuses before any route, for GET /metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lockstep::server {

// Where a refusal was decided. A read going silent for --read-timeout counts with the phase it
// interrupted (head or body), as its 408 does. Each refused request or connection counts once,
// under one reason, and never also in requests_rejected_4xx/5xx_total: the intake's refusals
// close the connection before httplib reads the request, and httplib's 413 is counted here in
// place of a rejection (server.cpp's error handler).
enum class LimitRefusal : size_t {
  kMaxConnections,           // the listener's 503 at --max-connections
  kMaxConnectionsPerClient,  // the listener's 503 at --max-connections-per-client
  kHeaderTimeout,            // the intake's 408: head not whole within --header-timeout (or silent)
  kHeaderTooLarge,           // the intake's 431: too many header lines or bytes
  kBodyTimeout,              // the intake's 408: body not whole within --body-timeout (or silent)
  kBodyTooLarge,  // 413 over --max-body: the intake's (chunked) or httplib's (Content-Length)
  kBadFraming,    // the intake's 400: Content-Length / Transfer-Encoding httplib could misread
  kMalformedChunkedBody,         // the intake's 400: a chunk's framing, or trailer fields
  kUnsupportedTransferEncoding,  // the intake's 501: a Transfer-Encoding other than chunked
};
inline constexpr size_t kRefusalKinds =
    static_cast<size_t>(LimitRefusal::kUnsupportedTransferEncoding) + 1;

// The listener, intake and worker threads count here without taking the metrics lock (the
// listener must never wait), and the counts live in the server's Metrics, not in globals.
class RefusalCounts {
 public:
  void Count(LimitRefusal r) {
    counts_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t Get(LimitRefusal r) const {
    return counts_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, kRefusalKinds> counts_{};
};

}  // namespace lockstep::server

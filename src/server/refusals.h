// Counts of the requests and connections the transport refuses at its limits, for GET /metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lockstep::server {

// Where a refusal was decided. A read going silent for --read-timeout counts with the phase it
// interrupted (head or body), as its 408 does.
enum class LimitRefusal : size_t {
  kMaxConnections,           // the listener's 503 at --max-connections
  kMaxConnectionsPerClient,  // the listener's 503 at --max-connections-per-client
  kHeaderTimeout,            // the intake's 408: head not whole within --header-timeout (or silent)
  kHeaderTooLarge,           // the intake's 431: too many header lines or bytes
  kBodyTimeout,              // the intake's 408: body not whole within --body-timeout (or silent)
};
inline constexpr size_t kRefusalKinds = 5;

// The listener and intake threads count here without taking the metrics lock (the
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

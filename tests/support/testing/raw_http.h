// Raw-socket HTTP clients for the server's transport tests: whole requests with bounded waits,
// slow clients (slowloris) that trickle a request one byte at a time, and the refusal counters.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace lockstep::testing {

// A connected loopback TCP socket (127.0.0.1, or ::1 with `ipv6`), or -1.
int ConnectLoopback(int port, bool ipv6 = false);

// Reads one response (head and Content-Length body) within `wait`; its status, 0 if the
// connection closed or the time ran out before a whole one came. `head` gets the status line and
// headers.
int ReadResponse(int fd, std::chrono::milliseconds wait, std::string* body = nullptr,
                 std::string* head = nullptr);

// Sends `bytes` whole on a fresh connection and reads the response (-1: could not connect).
int RawStatus(int port, const std::string& bytes, std::string* body = nullptr,
              std::string* head = nullptr);

// A whole POST of `body` to `route` with a Content-Length, `extra_headers` (each ending in
// \r\n) before it.
std::string RawPost(const std::string& route, const std::string& body,
                    const std::string& extra_headers = "");

// The value of one series of /metrics text `metrics`, named with its labels as it is printed
// (`lockstep:requests_total`, `lockstep:requests_refused_total{reason="bad_framing"}`); -1 if
// it has no such series.
int64_t MetricValue(const std::string& metrics, const std::string& series);

// Every reason the server counts refusals under, in a fixed order: the listener's
// (lockstep:connections_refused_total), then those refused before a route
// (lockstep:requests_refused_total).
std::vector<std::string> RefusalReasons();
// The count of refusal `reason` in /metrics text `metrics`, read from its own family; -1 when
// the text has no such series or `reason` is none of RefusalReasons().
int64_t RefusalCount(const std::string& metrics, const std::string& reason);

// Every refusal counter in /metrics text `metrics`, in RefusalReasons() order, e.g.
// "max_connections=0 max_connections_per_client=0 header_timeout=2 ..." (a missing one: -1), so
// one comparison checks the counted reason and that the others stayed 0.
std::string RefusalsIn(const std::string& metrics);
// The RefusalsIn text of a server that refused exactly `counts` (reason, count), every other
// reason 0. An unknown reason gives "unknown reason 'NAME'", which no RefusalsIn text equals.
std::string ExpectedRefusals(const std::vector<std::pair<std::string, int64_t>>& counts = {});
// GET /metrics on a fresh connection, as RefusalsIn ("no metrics" if it failed).
std::string Refusals(int port);

// Slowloris clients: each sends `prefix` (a request line and the start of a header, or a whole
// head and the start of a body), then one byte every `every`. One thread drives them all (for
// at most a minute) and notes when the server closes each, and what it replied.
class Tricklers {
 public:
  Tricklers(int port, int n, const std::string& prefix, std::chrono::milliseconds every);
  ~Tricklers() { Close(); }
  Tricklers(const Tricklers&) = delete;
  Tricklers& operator=(const Tricklers&) = delete;

  void Close();
  int Open() const;
  // Seconds from connecting until the server closed connection i (-1: still open).
  double ClosedAfter(size_t i) const;
  std::string Reply(size_t i) const;

 private:
  struct Conn {
    int fd = -1;
    std::chrono::steady_clock::time_point connected;
    double closed_after = -1;
    std::string reply;
  };
  void Drive(std::chrono::milliseconds every);
  static bool Gone(Conn& c, bool send_now);

  mutable std::mutex mu_;
  std::vector<Conn> conns_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace lockstep::testing

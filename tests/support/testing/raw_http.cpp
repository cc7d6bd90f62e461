// Raw-socket HTTP clients for the server's transport tests (see raw_http.h).
#include "testing/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace lockstep::testing {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int ConnectLoopback(int port, bool ipv6) {
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in6 addr6{};
  addr6.sin6_family = AF_INET6;
  addr6.sin6_port = htons(static_cast<uint16_t>(port));
  addr6.sin6_addr = in6addr_loopback;
  const int r = ipv6 ? ::connect(fd, reinterpret_cast<sockaddr*>(&addr6), sizeof addr6)
                     : ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (r != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int ReadResponse(int fd, std::chrono::milliseconds wait, std::string* body, std::string* head) {
  std::string in;
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t at = in.find("Content-Length: ");
      const size_t length = at < end ? std::stoul(in.substr(at + 16)) : 0;
      if (in.size() >= end + 4 + length) {
        if (body) *body = in.substr(end + 4, length);
        if (head) *head = in.substr(0, end + 2);
        return in.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(in.c_str() + 9) : 0;
      }
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    in.append(buf, static_cast<size_t>(n));
  }
  return 0;
}

namespace {

struct RefusalSeries {
  const char* family;  // lockstep:{family}_refused_total
  const char* reason;
};

constexpr RefusalSeries kRefusalSeries[] = {
    {"connections", "max_connections"},
    {"connections", "max_connections_per_client"},
    {"requests", "header_timeout"},
    {"requests", "header_too_large"},
    {"requests", "body_timeout"},
    {"requests", "body_too_large"},
    {"requests", "bad_framing"},
    {"requests", "malformed_chunked_body"},
    {"requests", "unsupported_transfer_encoding"},
};

}  // namespace

std::string RawPost(const std::string& route, const std::string& body,
                    const std::string& extra_headers) {
  return "POST " + route + " HTTP/1.1\r\nHost: x\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

int64_t MetricValue(const std::string& metrics, const std::string& series) {
  // Every series line follows a newline: the text starts with a # HELP line.
  const std::string start = "\n" + series + " ";
  const size_t at = metrics.find(start);
  if (at == std::string::npos) return -1;
  // Counters print as integers or as doubles with an integral value ("3", "3.0").
  return static_cast<int64_t>(std::strtod(metrics.c_str() + at + start.size(), nullptr));
}

std::vector<std::string> RefusalReasons() {
  std::vector<std::string> reasons;
  for (const RefusalSeries& s : kRefusalSeries) reasons.emplace_back(s.reason);
  return reasons;
}

int64_t RefusalCount(const std::string& metrics, const std::string& reason) {
  for (const RefusalSeries& s : kRefusalSeries)
    if (reason == s.reason)
      return MetricValue(
          metrics, fmt::format("lockstep:{}_refused_total{{reason=\"{}\"}}", s.family, reason));
  return -1;
}

std::string RefusalsIn(const std::string& metrics) {
  std::string out;
  for (const RefusalSeries& s : kRefusalSeries)
    out +=
        fmt::format("{}{}={}", out.empty() ? "" : " ", s.reason, RefusalCount(metrics, s.reason));
  return out;
}

std::string ExpectedRefusals(const std::vector<std::pair<std::string, int64_t>>& counts) {
  for (const auto& [reason, count] : counts) {
    const auto known = std::find_if(std::begin(kRefusalSeries), std::end(kRefusalSeries),
                                    [&](const RefusalSeries& s) { return reason == s.reason; });
    if (known == std::end(kRefusalSeries)) return fmt::format("unknown reason '{}'", reason);
  }
  std::string out;
  for (const RefusalSeries& s : kRefusalSeries) {
    int64_t value = 0;
    for (const auto& [reason, count] : counts)
      if (reason == s.reason) value += count;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", s.reason, value);
  }
  return out;
}

std::string Refusals(int port) {
  std::string body;
  if (RawStatus(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &body) != 200)
    return "no metrics";
  return RefusalsIn(body);
}

int RawStatus(int port, const std::string& bytes, std::string* body, std::string* head) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  const int status = ReadResponse(fd, 3s, body, head);
  ::close(fd);
  return status;
}

Tricklers::Tricklers(int port, int n, const std::string& prefix, std::chrono::milliseconds every) {
  for (int i = 0; i < n; ++i) {
    Conn c;
    c.fd = ConnectLoopback(port);
    c.connected = Clock::now();
    if (c.fd >= 0) ::send(c.fd, prefix.data(), prefix.size(), MSG_NOSIGNAL);
    conns_.push_back(c);
  }
  thread_ = std::thread([this, every] { Drive(every); });
}

void Tricklers::Close() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (Conn& c : conns_)
    if (c.fd >= 0) ::close(std::exchange(c.fd, -1));
}

int Tricklers::Open() const {
  std::lock_guard lock(mu_);
  int open = 0;
  for (const Conn& c : conns_) open += c.fd >= 0 && c.closed_after < 0;
  return open;
}

double Tricklers::ClosedAfter(size_t i) const {
  std::lock_guard lock(mu_);
  return conns_[i].closed_after;
}

std::string Tricklers::Reply(size_t i) const {
  std::lock_guard lock(mu_);
  return conns_[i].reply;
}

void Tricklers::Drive(std::chrono::milliseconds every) {
  const auto until = Clock::now() + 60s;
  auto next_byte = Clock::now() + every;
  while (!stop_ && Clock::now() < until) {
    std::this_thread::sleep_for(5ms);
    const bool send_now = Clock::now() >= next_byte;
    if (send_now) next_byte += every;
    std::lock_guard lock(mu_);
    for (Conn& c : conns_)
      if (c.fd >= 0 && c.closed_after < 0 && Gone(c, send_now))
        c.closed_after = std::chrono::duration<double>(Clock::now() - c.connected).count();
  }
}

bool Tricklers::Gone(Conn& c, bool send_now) {
  char buf[1024];
  ssize_t n;
  while ((n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
    c.reply.append(buf, static_cast<size_t>(n));
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  return send_now && ::send(c.fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN;
}

}  // namespace lockstep::testing

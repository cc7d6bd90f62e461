// Client connections: bounded, stoppable reads and writes for cpp-httplib's request handling.
#include "server/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace lockstep::server {
namespace {

bool WouldBlock() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void IpAndPort(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

Connection::Connection(int socket, size_t requests, std::atomic<size_t>* open)
    : fd(socket), requests_left(requests), open_(open) {
  if (open_) open_->fetch_add(1);
}

Connection::~Connection() {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  if (open_) open_->fetch_sub(1);
}

int PollTimeoutMs(Clock::time_point until) {
  if (until == Clock::time_point::max()) return -1;
  const auto left = until - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

Readiness WaitFor(int fd, short events, int stop_fd, Clock::time_point until) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int r = ::poll(fds, 2, PollTimeoutMs(until));
    if (r < 0 && errno != EINTR) return Readiness::kStopped;  // cannot wait: give up the client
    if (r > 0 && fds[0].revents != 0) return Readiness::kReady;
    if (r > 0 && fds[1].revents != 0) return Readiness::kStopped;
    if (r == 0 && Clock::now() >= until) return Readiness::kTimedOut;
  }
}

ConnStream::ConnStream(Connection& conn, int stop_fd, StreamTimeouts timeouts,
                       Clock::time_point head_deadline)
    : conn_(conn), stop_fd_(stop_fd), timeouts_(timeouts), head_deadline_(head_deadline) {}

ConnStream::~ConnStream() {
  conn_.pending.erase(0, consumed_);
}

void ConnStream::HeadRead() {
  head_read_ = true;
  body_deadline_ = Clock::now() + timeouts_.body;
}

Clock::time_point ConnStream::ReadDeadline() const {
  const Clock::time_point silent = Clock::now() + timeouts_.read;
  return std::min(silent, head_read_ ? body_deadline_ : head_deadline_);
}

bool ConnStream::WaitReadable() const {
  if (expiry_ != ReadExpiry::kNone) return false;
  const Clock::time_point until = ReadDeadline();
  const Readiness r = WaitFor(conn_.fd, POLLIN, stop_fd_, until);
  if (r == Readiness::kTimedOut && head_read_)
    expiry_ = until == body_deadline_ ? ReadExpiry::kBodyDeadline : ReadExpiry::kSilent;
  return r == Readiness::kReady;
}

bool ConnStream::is_readable() const {
  return consumed_ < conn_.pending.size() || WaitReadable();
}

bool ConnStream::is_writable() const {
  return expiry_ == ReadExpiry::kNone &&
         WaitFor(conn_.fd, POLLOUT, stop_fd_, Clock::now() + timeouts_.write) == Readiness::kReady;
}

ssize_t ConnStream::read(char* ptr, size_t size) {
  if (consumed_ < conn_.pending.size()) {
    const size_t n = std::min(size, conn_.pending.size() - consumed_);
    std::memcpy(ptr, conn_.pending.data() + consumed_, n);
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }
  for (;;) {
    if (!WaitReadable()) return -1;
    const ssize_t n = ::recv(conn_.fd, ptr, size, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (!WouldBlock()) return -1;
  }
}

// Sends what fits without blocking, and waits (bounded, stoppable) only when nothing fits: a
// blocking send to a client that stopped reading would hold the worker past Stop.
ssize_t ConnStream::write(const char* ptr, size_t size) {
  if (expiry_ != ReadExpiry::kNone) return -1;  // the caller answers 408 itself
  const Clock::time_point until = Clock::now() + timeouts_.write;
  for (;;) {
    const ssize_t n = ::send(conn_.fd, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (!WouldBlock()) return -1;
    if (WaitFor(conn_.fd, POLLOUT, stop_fd_, until) != Readiness::kReady) return -1;
  }
}

void ConnStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(conn_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    IpAndPort(addr, ip, port);
}

void ConnStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(conn_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    IpAndPort(addr, ip, port);
}

}  // namespace lockstep::server

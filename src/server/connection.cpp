// Client connections: per-client counts, and bounded, stoppable writes for cpp-httplib's request
// handling of requests already received whole.
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
#include <string_view>
#include <utility>

#include "core/check.h"

namespace lockstep::server {
namespace {

// httplib answers a request's "Expect: 100-continue" with this before reading the body.
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

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

PeerSeat::~PeerSeat() {
  if (counts_) counts_->Release(peer_);
}

PeerSeat::PeerSeat(PeerSeat&& other) noexcept
    : counts_(std::exchange(other.counts_, nullptr)), peer_(std::move(other.peer_)) {}

PeerSeat& PeerSeat::operator=(PeerSeat&& other) noexcept {
  if (this != &other) {
    if (counts_) counts_->Release(peer_);
    counts_ = std::exchange(other.counts_, nullptr);
    peer_ = std::move(other.peer_);
  }
  return *this;
}

std::optional<PeerSeat> PeerCounts::Take(const std::string& peer, size_t limit) {
  CHECK(limit >= 1);  // at 0 the map would keep an entry of 0
  std::lock_guard lock(mu_);
  size_t& open = open_[peer];
  if (open >= limit) return std::nullopt;
  ++open;
  return PeerSeat(this, peer);
}

size_t PeerCounts::Open(const std::string& peer) const {
  std::lock_guard lock(mu_);
  const auto it = open_.find(peer);
  return it == open_.end() ? 0 : it->second;
}

size_t PeerCounts::Addresses() const {
  std::lock_guard lock(mu_);
  return open_.size();
}

void PeerCounts::Release(const std::string& peer) {
  std::lock_guard lock(mu_);
  const auto it = open_.find(peer);
  CHECK(it != open_.end() && it->second > 0);
  if (--it->second == 0) open_.erase(it);
}

Connection::Connection(int socket, size_t requests, std::atomic<size_t>* open, PeerSeat seat)
    : fd(socket), requests_left(requests), open_(open), seat_(std::move(seat)) {
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

ConnStream::ConnStream(Connection& conn, size_t request_size, int stop_fd,
                       Clock::duration write_timeout)
    : conn_(conn), request_size_(request_size), stop_fd_(stop_fd), write_timeout_(write_timeout) {
  CHECK(request_size_ <= conn_.pending.size());
}

// The whole request goes, also what httplib left unread (a GET's body, or a body a route refused
// before reading it): the next request starts where the intake found this one's end.
ConnStream::~ConnStream() {
  conn_.pending.erase(0, request_size_);
  // A body up to --max-body passed through here: an idle keep-alive connection keeps no such
  // buffer while it waits for its next request.
  if (conn_.pending.empty() && conn_.pending.capacity() > (64 << 10))
    std::string().swap(conn_.pending);
}

bool ConnStream::is_writable() const {
  return WaitFor(conn_.fd, POLLOUT, stop_fd_, Clock::now() + write_timeout_) == Readiness::kReady;
}

ssize_t ConnStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, request_size_ - consumed_);
  std::memcpy(ptr, conn_.pending.data() + consumed_, n);
  consumed_ += n;
  return static_cast<ssize_t>(n);
}

// Sends what fits without blocking, and waits (bounded, stoppable) only when nothing fits: a
// blocking send to a client that stopped reading would hold the worker past Stop.
ssize_t ConnStream::write(const char* ptr, size_t size) {
  // The body is here already: the intake sent the 100 Continue if the client had to wait for
  // one, and httplib's own would be a second interim response the client never asked for.
  if (!std::exchange(wrote_, true) && std::string_view(ptr, size) == kContinue)
    return static_cast<ssize_t>(size);
  const Clock::time_point until = Clock::now() + write_timeout_;
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

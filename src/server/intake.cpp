// The HTTP server's intake thread (request heads under a deadline and size limits) and workers.
#include "server/intake.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "server/context.h"

namespace lockstep::server {

// A connection waiting for (the rest of) a request's head.
struct HttpServer::Waiting {
  std::shared_ptr<Connection> conn;  // null once handed to a worker or dropped
  HeadScanner scan;
  bool started = false;          // the request's first byte has arrived
  Clock::time_point until;       // the deadline now: the keep-alive wait, or head and silence
  Clock::time_point head_until;  // the whole head's deadline, from its first byte
};

namespace {

// Runs each task at once on the calling thread, httplib's listener: the only task it gets hands
// an accepted socket to the intake, which never blocks.
class InPlaceQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

void Signal(int event_fd) {
  const uint64_t one = 1;
  // Fails only when the counter would overflow, and then the descriptor is readable anyway.
  [[maybe_unused]] const ssize_t n = ::write(event_fd, &one, sizeof one);
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

const char* Reason(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// The server's last word to a client before closing, from the intake, the listener or a worker
// whose read timed out: small, sent without blocking (a client that does not read loses it).
// Its unread bytes are drained first, so closing sends a FIN rather than a reset, which could
// discard the response before the client reads it. A 503 tells the client when to retry.
void Refuse(const Connection& c, int status, const std::string& message) {
  const std::string body = Dump(ErrorJson(status, message));
  const std::string response = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "{}Connection: close\r\n\r\n{}",
      status, Reason(status), body.size(), status == 503 ? "Retry-After: 1\r\n" : "", body);
  char sink[4096];
  for (int i = 0; i < 64 && ::recv(c.fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  [[maybe_unused]] const ssize_t n =
      ::send(c.fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

HttpServer::HttpServer(const IntakeOptions& options, RefusalCounts& refusals)
    : options_(options), refusals_(refusals) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  new_task_queue = [] { return new InPlaceQueue(); };
  // httplib writes these into each response's Keep-Alive header; the intake applies them.
  set_keep_alive_max_count(options_.keep_alive_max);
  set_keep_alive_timeout(std::chrono::ceil<std::chrono::seconds>(options_.keep_alive).count());
  if (!is_valid()) return;  // no descriptors: Bind refuses, and no thread would ever wake
  workers_ = std::make_unique<httplib::ThreadPool>(std::max<size_t>(1, options_.workers));
  intake_ = std::thread([this] { IntakeLoop(); });
}

HttpServer::~HttpServer() {
  Shutdown();
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool HttpServer::is_valid() const {
  return stop_fd_ >= 0 && wake_fd_ >= 0;
}

void HttpServer::StopIntake() {
  if (!stopping_.exchange(true) && stop_fd_ >= 0) Signal(stop_fd_);
}

void HttpServer::Shutdown() {
  StopIntake();
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (intake_.joinable()) intake_.join();
  // Jobs still queued see stopping_ and close their connection; running ones end their waits.
  if (workers_) workers_->shutdown();
  std::lock_guard arrivals_lock(arrivals_mu_);
  arrivals_.clear();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (open_.load() >= options_.max_connections) {
    const Connection refused(sock, 0);  // not counted: it closes on leaving this scope
    refusals_.Count(LimitRefusal::kMaxConnections);
    Refuse(refused, 503,
           fmt::format("too many open connections (--max-connections {}); retry shortly",
                       options_.max_connections));
    return true;
  }
  Hand(std::make_shared<Connection>(sock, options_.keep_alive_max, &open_));
  return true;
}

void HttpServer::Hand(std::shared_ptr<Connection> conn) {
  if (stopping_.load()) return;  // dropping the last reference closes it
  {
    std::lock_guard lock(arrivals_mu_);
    arrivals_.push_back(std::move(conn));
  }
  Signal(wake_fd_);
}

void HttpServer::IntakeLoop() {
  std::vector<Waiting> waiting;
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    fds.assign({{stop_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
    Clock::time_point next = Clock::time_point::max();
    for (const Waiting& w : waiting) {
      fds.push_back({w.conn->fd, POLLIN, 0});
      next = std::min(next, w.until);
    }
    if (::poll(fds.data(), fds.size(), PollTimeoutMs(next)) < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // ENOMEM: try again
      continue;
    }
    if (fds[0].revents != 0) break;
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (fds[i + 2].revents != 0) Receive(waiting[i], now);
      if (waiting[i].conn) Expire(waiting[i], now);
    }
    std::erase_if(waiting, [](const Waiting& w) { return !w.conn; });
    if (fds[1].revents != 0) TakeArrivals(waiting, now);
  }
  // Leaving drops every waiting connection, which closes it.
}

void HttpServer::TakeArrivals(std::vector<Waiting>& waiting, Clock::time_point now) {
  uint64_t count = 0;
  // Reset before taking the list: an arrival after this read signals again.
  [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
  std::vector<std::shared_ptr<Connection>> arrived;
  {
    std::lock_guard lock(arrivals_mu_);
    arrived.swap(arrivals_);
  }
  for (std::shared_ptr<Connection>& conn : arrived) {
    Waiting w{std::move(conn), HeadScanner(options_.limits)};
    w.until = now + options_.keep_alive;
    // A keep-alive connection may bring the next request's first bytes back with it.
    if (!w.conn->pending.empty()) {
      Heard(w, now);
      Decide(w);
    }
    if (w.conn) waiting.push_back(std::move(w));
  }
}

void HttpServer::Heard(Waiting& w, Clock::time_point now) {
  if (!w.started) {
    w.started = true;
    w.head_until = now + options_.head_timeout;
  }
  w.until = std::min(w.head_until, now + options_.read_timeout);
}

void HttpServer::Receive(Waiting& w, Clock::time_point now) {
  char buf[16 << 10];
  const ssize_t n = ::recv(w.conn->fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // the client hung up (or its connection failed): nobody to answer
    w.conn.reset();
    return;
  }
  w.conn->pending.append(buf, static_cast<size_t>(n));
  Heard(w, now);
  Decide(w);
}

void HttpServer::Decide(Waiting& w) {
  switch (w.scan.Scan(w.conn->pending)) {
    case HeadState::kIncomplete:
      return;
    case HeadState::kTooLarge:
      refusals_.Count(LimitRefusal::kHeaderTooLarge);
      Refuse(*w.conn, 431,
             fmt::format("request head larger than {} bytes or {} header lines",
                         options_.limits.max_bytes, options_.limits.max_lines));
      w.conn.reset();
      return;
    case HeadState::kComplete:
      workers_->enqueue(
          [this, conn = std::move(w.conn), until = w.head_until] { Serve(conn, until); });
      return;
  }
}

void HttpServer::Expire(Waiting& w, Clock::time_point now) {
  if (now < w.until) return;
  // A connection idle between requests just closes, as httplib's keep-alive wait did.
  if (w.started) {
    refusals_.Count(LimitRefusal::kHeaderTimeout);
    Refuse(*w.conn, 408,
           w.until == w.head_until
               ? fmt::format("request head not received within --header-timeout ({} s)",
                             Seconds(options_.head_timeout))
               : fmt::format("client silent for --read-timeout ({} s) while sending its head",
                             Seconds(options_.read_timeout)));
  }
  w.conn.reset();
}

void HttpServer::Serve(const std::shared_ptr<Connection>& conn, Clock::time_point head_deadline) {
  if (stopping_.load()) return;
  bool ok = false, closed = false;
  ReadExpiry expiry = ReadExpiry::kNone;
  try {
    ConnStream strm(*conn, stop_fd_,
                    {options_.read_timeout, options_.write_timeout, options_.body_timeout},
                    head_deadline);
    ok = process_request(strm, conn->requests_left == 1, closed,
                         [&strm](httplib::Request&) { strm.HeadRead(); });
    expiry = strm.expiry();
  } catch (...) {  // httplib catches the handlers' exceptions; anything else drops the client
    ok = false;
  }
  // The body did not come in time; httplib's answer to the failed read (400) was never sent.
  if (expiry != ReadExpiry::kNone) refusals_.Count(LimitRefusal::kBodyTimeout);
  if (expiry == ReadExpiry::kBodyDeadline)
    Refuse(*conn, 408,
           fmt::format("request body not received within --body-timeout ({} s)",
                       Seconds(options_.body_timeout)));
  else if (expiry == ReadExpiry::kSilent)
    Refuse(*conn, 408,
           fmt::format("client silent for --read-timeout ({} s) while sending its body",
                       Seconds(options_.read_timeout)));
  if (expiry == ReadExpiry::kNone && ok && !closed && --conn->requests_left > 0) Hand(conn);
}

}  // namespace lockstep::server

// The HTTP server's intake thread (whole requests under deadlines and size limits) and workers.
#include "server/intake.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "server/body_scan.h"
#include "server/client_key.h"
#include "server/context.h"

namespace lockstep::server {

// A connection waiting for (the rest of) a request: its head, then its body.
struct HttpServer::Waiting {
  std::shared_ptr<Connection> conn;  // null once handed to a worker or dropped
  HeadScanner scan;
  std::optional<BodyScanner> body;  // once the head is whole
  Framing framing;                  // once the head is whole
  size_t head_size = 0;
  uint64_t drop_left = 0;   // bytes still to drop of a Content-Length body over max_body
  bool started = false;     // the request's first byte has arrived
  bool continued = false;   // the intake has sent 100 Continue
  Clock::time_point until;  // the deadline now: the keep-alive wait, or head / body and silence
  Clock::time_point head_until;  // the whole head's deadline, from its first byte
  Clock::time_point body_until;  // the whole body's deadline, from the head's end
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
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// The server's last word to a client before closing, from the intake or the listener: small, sent
// without blocking (a client that does not read loses it). Its unread bytes are drained first, so
// closing sends a FIN rather than a reset, which could discard the response before the client reads
// it. A 503 tells the client when to retry.
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
  PeerSeat seat;  // none without a per-client limit: nothing to count
  if (const size_t limit = options_.max_connections_per_client; limit > 0) {
    const std::string client = PeerClientKey(sock);  // an IPv4 address or an IPv6 /64
    std::optional<PeerSeat> taken = peers_.Take(client, limit);
    if (!taken) {
      const Connection refused(sock, 0);
      refusals_.Count(LimitRefusal::kMaxConnectionsPerClient);
      Refuse(refused, 503,
             fmt::format("too many open connections from {} (--max-connections-per-client {}); "
                         "retry shortly",
                         client, limit));
      return true;
    }
    seat = std::move(*taken);
  }
  Hand(std::make_shared<Connection>(sock, options_.keep_alive_max, &open_, std::move(seat)));
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
    Waiting w{.conn = std::move(conn), .scan = HeadScanner(options_.limits)};
    w.until = now + options_.keep_alive;
    // A keep-alive connection may bring the next request's first bytes back with it.
    if (!w.conn->pending.empty()) {
      Heard(w, now);
      Decide(w, now);
    }
    if (w.conn) waiting.push_back(std::move(w));
  }
}

void HttpServer::Heard(Waiting& w, Clock::time_point now) {
  if (!w.started) {
    w.started = true;
    w.head_until = now + options_.head_timeout;
  }
  w.until = std::min(w.body ? w.body_until : w.head_until, now + options_.read_timeout);
}

void HttpServer::Receive(Waiting& w, Clock::time_point now) {
  char buf[64 << 10];
  const ssize_t n = ::recv(w.conn->fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // the client hung up (or its connection failed): nobody to answer
    w.conn.reset();
    return;
  }
  w.conn->pending.append(buf, static_cast<size_t>(n));
  Heard(w, now);
  Decide(w, now);
}

void HttpServer::Decide(Waiting& w, Clock::time_point now) {
  if (!w.body) {
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
        if (!StartBody(w, now)) return;
        break;
    }
  }
  DecideBody(w);
}

// The head is whole: reads how its body is framed and starts the body's deadline. False when
// the request was already dealt with here (refused, or handed on without a body).
bool HttpServer::StartBody(Waiting& w, Clock::time_point now) {
  w.head_size = w.scan.head_size();
  const Expected<Framing> framing =
      ParseFraming(std::string_view(w.conn->pending).substr(0, w.head_size));
  if (!framing.ok() || framing->kind == Framing::Kind::kUnsupported) {
    if (framing.ok()) {
      refusals_.Count(LimitRefusal::kUnsupportedTransferEncoding);
      Refuse(*w.conn, 501,
             fmt::format("Transfer-Encoding '{}' is not supported (only chunked)",
                         framing->coding.substr(0, 64)));
    } else {
      refusals_.Count(LimitRefusal::kBadFraming);
      Refuse(*w.conn, 400, framing.status().message());
    }
    w.conn.reset();
    return false;
  }
  w.framing = *framing;
  w.body.emplace(w.framing, options_.max_body);
  w.body_until = now + options_.body_timeout;
  w.until = std::min(w.body_until, now + options_.read_timeout);
  if (w.framing.kind == Framing::Kind::kLength && w.framing.length > options_.max_body) {
    // A client waiting for 100 Continue sends no body: httplib answers 413 at once, and the
    // connection closes after it, as the body may still come and would not be read. Not counted
    // here: httplib's 413 is (server.cpp), as the request may get another answer first (401).
    if (w.framing.expect_continue && w.conn->pending.size() == w.head_size) {
      ToWorker(w, w.head_size, true);
      return false;
    }
    w.drop_left = w.framing.length;
  }
  return true;
}

void HttpServer::DecideBody(Waiting& w) {
  std::string& pending = w.conn->pending;
  if (w.drop_left > 0) {
    // Received and dropped, so that the 413 is read (closing on unread bytes sends a reset) and
    // the connection can carry on; httplib then finds no body to skip.
    const uint64_t drop = std::min<uint64_t>(w.drop_left, pending.size() - w.head_size);
    pending.erase(w.head_size, static_cast<size_t>(drop));
    w.drop_left -= drop;
    if (w.drop_left == 0) ToWorker(w, w.head_size, false);
    return;
  }
  switch (w.body->Scan(std::string_view(pending).substr(w.head_size))) {
    case BodyState::kIncomplete:
      if (w.framing.expect_continue && !std::exchange(w.continued, true)) {
        const std::string_view go = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] const ssize_t n =
            ::send(w.conn->fd, go.data(), go.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      return;
    case BodyState::kComplete:
      ToWorker(w, w.head_size + w.body->wire_size(), false);
      return;
    case BodyState::kTooLarge:
      refusals_.Count(LimitRefusal::kBodyTooLarge);
      Refuse(*w.conn, 413,
             fmt::format("request body larger than --max-body {} bytes", options_.max_body));
      w.conn.reset();
      return;
    case BodyState::kMalformed:
      refusals_.Count(LimitRefusal::kMalformedChunkedBody);
      Refuse(*w.conn, 400, "malformed chunked body: " + w.body->error());
      w.conn.reset();
      return;
  }
}

void HttpServer::ToWorker(Waiting& w, size_t request_size, bool close_after) {
  workers_->enqueue([this, conn = std::move(w.conn), request_size, close_after] {
    Serve(conn, request_size, close_after);
  });
}

void HttpServer::Expire(Waiting& w, Clock::time_point now) {
  if (now < w.until) return;
  if (w.body) {
    refusals_.Count(LimitRefusal::kBodyTimeout);
    Refuse(*w.conn, 408,
           w.until == w.body_until
               ? fmt::format("request body not received within --body-timeout ({} s)",
                             Seconds(options_.body_timeout))
               : fmt::format("client silent for --read-timeout ({} s) while sending its body",
                             Seconds(options_.read_timeout)));
  } else if (w.started) {  // a connection idle between requests just closes, as in httplib
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

void HttpServer::Serve(const std::shared_ptr<Connection>& conn, size_t request_size,
                       bool close_after) {
  if (stopping_.load()) return;
  bool ok = false, closed = false;
  try {
    ConnStream strm(*conn, request_size, stop_fd_, options_.write_timeout);
    ok = process_request(strm, close_after || conn->requests_left == 1, closed, nullptr);
  } catch (...) {  // httplib catches the handlers' exceptions; anything else drops the client
    ok = false;
  }
  if (ok && !closed && !close_after && --conn->requests_left > 0) Hand(conn);
}

}  // namespace lockstep::server

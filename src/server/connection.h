// A client connection of the HTTP server, and the cpp-httplib Stream a worker serves it through.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

namespace lockstep::server {

using Clock = std::chrono::steady_clock;

// An accepted socket (owned: shut down and closed on destruction) with the bytes already read
// from it that no request has consumed yet: the start of its next request. While it lives it
// counts in `*open` (when given), the server's count of open connections (--max-connections).
struct Connection {
  Connection(int socket, size_t requests, std::atomic<size_t>* open = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd;
  std::string pending;
  size_t requests_left;  // requests this keep-alive connection may still make

 private:
  std::atomic<size_t>* open_;
};

struct StreamTimeouts {
  Clock::duration read;   // longest wait for the next byte (--read-timeout)
  Clock::duration write;  // longest wait for room to send
  Clock::duration body;   // the whole body, from the end of the head (--body-timeout)
};

// Why a read gave up on the client: the request is then answered 408 and the connection closed.
enum class ReadExpiry { kNone, kSilent, kBodyDeadline };

// Serves the connection's pending bytes first, then reads the socket. Every wait is bounded and
// none starts once `stop_fd` is readable (the server is stopping), so a stalled client cannot
// hold a worker past Stop. Until HeadRead(), reads also end at `head_deadline`: the intake hands
// over whole heads, so this only matters if httplib ever reads a head differently. After it,
// reads end at the body deadline, so a client trickling its body holds the worker no longer
// than --body-timeout. A read that times out ends the request: expiry() says why, and writes
// fail from then on, so httplib's own answer (a 400) never reaches the client and the caller
// can answer 408 instead.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Connection& conn, int stop_fd, StreamTimeouts timeouts,
             Clock::time_point head_deadline);
  ~ConnStream() override;  // drops the bytes consumed from conn.pending
  ConnStream(const ConnStream&) = delete;
  ConnStream& operator=(const ConnStream&) = delete;

  // The head has been parsed: the body deadline starts now.
  void HeadRead();
  ReadExpiry expiry() const { return expiry_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return conn_.fd; }

 private:
  Clock::time_point ReadDeadline() const;
  // Waits for the socket to be readable under ReadDeadline; notes a timeout after the head.
  bool WaitReadable() const;

  Connection& conn_;
  int stop_fd_;
  StreamTimeouts timeouts_;
  Clock::time_point head_deadline_;
  Clock::time_point body_deadline_ = Clock::time_point::max();
  bool head_read_ = false;
  size_t consumed_ = 0;  // bytes of conn_.pending already served
  // Set by the first read that times out after the head; is_readable() is const for httplib but
  // may be where the timeout happens, hence mutable.
  mutable ReadExpiry expiry_ = ReadExpiry::kNone;
};

enum class Readiness { kReady, kTimedOut, kStopped };

// Waits until `fd` reports one of `events` (or an error or hang-up, which the next call then
// reports), `until` passes, or `stop_fd` becomes readable, whichever comes first; a ready `fd`
// wins over a stop. Interrupted waits resume.
Readiness WaitFor(int fd, short events, int stop_fd, Clock::time_point until);

// Milliseconds from now to `until` for poll(): rounded up, 0 when past, -1 (forever) for max().
int PollTimeoutMs(Clock::time_point until);

}  // namespace lockstep::server

// A client connection of the HTTP server, the per-client count of open connections, and the
// cpp-httplib Stream a worker serves one whole request through.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace lockstep::server {

using Clock = std::chrono::steady_clock;

class PeerCounts;

// One open connection's place in a PeerCounts (move-only; empty when default-made): given back
// when it is destroyed, so a connection can never leave its client counted.
class PeerSeat {
 public:
  PeerSeat() = default;
  PeerSeat(PeerCounts* counts, std::string peer) : counts_(counts), peer_(std::move(peer)) {}
  ~PeerSeat();
  PeerSeat(PeerSeat&& other) noexcept;
  PeerSeat& operator=(PeerSeat&& other) noexcept;
  PeerSeat(const PeerSeat&) = delete;
  PeerSeat& operator=(const PeerSeat&) = delete;

 private:
  PeerCounts* counts_ = nullptr;
  std::string peer_;
};

// Open connections per client (--max-connections-per-client), keyed by ClientKey: an IPv4
// address or an IPv6 /64. The listener takes a seat for each connection, so checking and
// counting are one step under the lock; a key whose count drops to 0 is erased, so the map holds
// only the clients connected now.
class PeerCounts {
 public:
  // A seat for one more connection from `peer`, or none when `limit` (at least 1) connections
  // from it are open already.
  std::optional<PeerSeat> Take(const std::string& peer, size_t limit);
  size_t Open(const std::string& peer) const;
  size_t Addresses() const;  // clients (keys) with a connection open now (the map's size)

 private:
  friend class PeerSeat;
  void Release(const std::string& peer);

  mutable std::mutex mu_;
  std::unordered_map<std::string, size_t> open_;  // guarded by mu_; no entry is 0
};

// An accepted socket (owned: shut down and closed on destruction) with the bytes already read
// from it that no request has consumed yet: the rest of its current request, then the start of
// the next. While it lives it counts in `*open` (when given), the server's count of open
// connections (--max-connections), and holds `seat` in the per-client counts.
struct Connection {
  Connection(int socket, size_t requests, std::atomic<size_t>* open = nullptr, PeerSeat seat = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd;
  std::string pending;
  size_t requests_left;  // requests this keep-alive connection may still make

 private:
  std::atomic<size_t>* open_;
  PeerSeat seat_;
};

// Serves one request that the intake has received whole: the first `request_size` bytes of
// conn.pending, then the end of the stream, so a worker never waits for a client to send. Writes
// send what fits without blocking and wait (at most `write_timeout`) only when nothing fits, and
// no wait starts once `stop_fd` is readable (the server is stopping), so a client that stopped
// reading cannot hold a worker past Stop.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Connection& conn, size_t request_size, int stop_fd, Clock::duration write_timeout);
  ~ConnStream() override;  // drops the request's bytes from conn.pending, read or not
  ConnStream(const ConnStream&) = delete;
  ConnStream& operator=(const ConnStream&) = delete;

  bool is_readable() const override { return consumed_ < request_size_; }
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return conn_.fd; }

 private:
  Connection& conn_;
  size_t request_size_;
  int stop_fd_;
  Clock::duration write_timeout_;
  size_t consumed_ = 0;  // bytes of the request already served
  bool wrote_ = false;
};

enum class Readiness { kReady, kTimedOut, kStopped };

// Waits until `fd` reports one of `events` (or an error or hang-up, which the next call then
// reports), `until` passes, or `stop_fd` becomes readable, whichever comes first; a ready `fd`
// wins over a stop. Interrupted waits resume.
Readiness WaitFor(int fd, short events, int stop_fd, Clock::time_point until);

// Milliseconds from now to `until` for poll(): rounded up, 0 when past, -1 (forever) for max().
int PollTimeoutMs(Clock::time_point until);

}  // namespace lockstep::server

// cpp-httplib's server with lockstep's connection handling: one intake thread receives every
// request whole (head and body) under deadlines and size limits, workers only serve whole ones.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/connection.h"
#include "server/head_scan.h"
#include "server/refusals.h"

namespace lockstep::server {

struct IntakeOptions {
  size_t workers = 8;  // threads serving requests that have arrived whole
  Clock::duration head_timeout = std::chrono::seconds(10);  // a head's first byte to its end
  Clock::duration body_timeout = std::chrono::seconds(30);  // a body, from the head's end
  Clock::duration read_timeout = std::chrono::seconds(10);  // longest silence while sending
  Clock::duration write_timeout = std::chrono::seconds(30);
  Clock::duration keep_alive = std::chrono::seconds(5);  // idle wait for a request's first byte
  size_t keep_alive_max = 5;                             // requests per connection
  size_t max_connections = 256;  // open at once; the listener refuses more with 503
  size_t max_connections_per_client =
      64;                     // open at once from one client (IPv4 address, IPv6 /64); 0: no limit
  size_t max_body = 1 << 20;  // a request body's bytes (decoded, if chunked)
  HeadLimits limits;
};

// httplib 0.11 reads a request on a pool thread, each read under its own timeout, so a client
// trickling its head or body held a thread for as long as it liked (or until --body-timeout),
// and more such clients than threads stalled every route. Here the listener hands each accepted
// socket to the intake thread, which polls all connections waiting for a request at once:
// - a head must end within head_timeout of its first byte, else 408; over the limits, 431;
// - then its body (Content-Length or chunked) must be whole within body_timeout of the head's
//   end, else 408 (the intake sends 100 Continue first if the client asked and must wait); a
//   Content-Length body over max_body is received and dropped, and its request then gets
//   httplib's 413 (as when httplib skipped it itself); a chunked one over it gets 413 at once;
//   framing the intake and httplib could read differently gets 400 (unknown codings 501);
// - no read may wait longer than read_timeout, else 408.
// Each refusal of the intake's own closes the connection. Only a whole request goes to a
// worker, which runs httplib's request handling on the bytes already read and never waits for the
// client to send; a keep-alive connection goes back to the intake between requests, so waiting
// clients hold no worker. Connections beyond max_connections open at once, or beyond
// max_connections_per_client from one client (ClientKey: an IPv4 address or an IPv6 /64), get
// 503 from the listener and are closed before
// they cost a thread or a slot in the intake. All of it (threads, descriptors, connections, the
// counts) belongs to this object; each refusal of its own (400, 408, 413, 431, 501, 503) is
// counted once in `refusals`, which must outlive it (httplib's 413 is counted by the server's
// error handler).
class HttpServer : public httplib::Server {
 public:
  HttpServer(const IntakeOptions& options, RefusalCounts& refusals);
  ~HttpServer() override;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // False when the descriptors the threads wait on could not be made (then nothing runs).
  bool is_valid() const override;
  // Ends every wait of the intake and the workers and takes no more connections (thread-safe,
  // idempotent). httplib's stop() still closes the listening socket.
  void StopIntake();
  // StopIntake, then waits for the intake thread and the workers to finish (idempotent).
  void Shutdown();

 private:
  struct Waiting;

  // Runs on the listener thread (the task queue runs it in place): hands `sock` to the intake,
  // or refuses it (503) when max_connections are open, or max_connections_per_client from its
  // client.
  bool process_and_close_socket(socket_t sock) override;
  void Hand(std::shared_ptr<Connection> conn);
  void IntakeLoop();
  void TakeArrivals(std::vector<Waiting>& waiting, Clock::time_point now);
  void Heard(Waiting& w, Clock::time_point now);
  void Receive(Waiting& w, Clock::time_point now);
  void Decide(Waiting& w, Clock::time_point now);
  bool StartBody(Waiting& w, Clock::time_point now);
  void DecideBody(Waiting& w);
  void ToWorker(Waiting& w, size_t request_size, bool close_after);
  void Expire(Waiting& w, Clock::time_point now);
  void Serve(const std::shared_ptr<Connection>& conn, size_t request_size, bool close_after);

  IntakeOptions options_;
  RefusalCounts& refusals_;
  int stop_fd_ = -1;  // an eventfd, written once by StopIntake and never read: stays readable
  int wake_fd_ = -1;  // an eventfd: arrivals are waiting
  std::atomic<bool> stopping_{false};
  // Connections alive now: only the listener adds one, so checking then adding cannot overshoot.
  std::atomic<size_t> open_{0};
  PeerCounts peers_;  // declared before everything holding connections: it outlives them
  std::mutex arrivals_mu_;
  std::vector<std::shared_ptr<Connection>> arrivals_;  // guarded by arrivals_mu_
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread intake_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
};

}  // namespace lockstep::server

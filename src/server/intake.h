// cpp-httplib's server with lockstep's connection handling: one intake thread receives every
// request's head under a total deadline and size limits, workers only serve whole heads.
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
  size_t workers = 8;  // threads serving requests whose head has arrived
  Clock::duration head_timeout = std::chrono::seconds(10);  // a head's first byte to its end
  Clock::duration body_timeout = std::chrono::seconds(30);  // a body, from the head's end
  Clock::duration read_timeout = std::chrono::seconds(10);  // longest silence while sending
  Clock::duration write_timeout = std::chrono::seconds(30);
  Clock::duration keep_alive = std::chrono::seconds(5);  // idle wait for a request's first byte
  size_t keep_alive_max = 5;                             // requests per connection
  size_t max_connections = 256;  // open at once; the listener refuses more with 503
  HeadLimits limits;
};

// httplib 0.11 reads a request's head on a pool thread, each read under its own timeout, so a
// client trickling header bytes held a thread forever, and enough of them stalled every route.
// Here the listener hands each accepted socket to the intake thread, which polls all connections
// waiting for a head at once: a head must end within head_timeout of its first byte (and no read
// may wait longer than read_timeout), else the connection gets 408 and is closed; a head over
// the limits gets 431. Only then does a worker run httplib's request handling on it, and a
// keep-alive connection goes back to the intake between requests, so waiting clients hold no
// worker. The worker reads the body under body_timeout (then 408 and the connection closes), so
// a client trickling its body holds a worker that long at most. Connections beyond
// max_connections open at once get 503 from the listener and are closed before they cost a
// thread or a slot in the intake. All of it (threads, descriptors, connections, the count)
// belongs to this object; each refusal is counted once in `refusals`, which must outlive it.
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
  // or refuses it (503) when max_connections are open.
  bool process_and_close_socket(socket_t sock) override;
  void Hand(std::shared_ptr<Connection> conn);
  void IntakeLoop();
  void TakeArrivals(std::vector<Waiting>& waiting, Clock::time_point now);
  void Heard(Waiting& w, Clock::time_point now);
  void Receive(Waiting& w, Clock::time_point now);
  void Decide(Waiting& w);
  void Expire(Waiting& w, Clock::time_point now);
  void Serve(const std::shared_ptr<Connection>& conn, Clock::time_point head_deadline);

  IntakeOptions options_;
  RefusalCounts& refusals_;
  int stop_fd_ = -1;  // an eventfd, written once by StopIntake and never read: stays readable
  int wake_fd_ = -1;  // an eventfd: arrivals are waiting
  std::atomic<bool> stopping_{false};
  // Connections alive now: only the listener adds one, so checking then adding cannot overshoot.
  std::atomic<size_t> open_{0};
  std::mutex arrivals_mu_;
  std::vector<std::shared_ptr<Connection>> arrivals_;  // guarded by arrivals_mu_
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread intake_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
};

}  // namespace lockstep::server

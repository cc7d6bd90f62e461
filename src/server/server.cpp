// The HTTP server's setup: limits, authentication, error shape, routes, start and stop.
#include "server/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "server/context.h"
#include "server/intake.h"

namespace lockstep::server {

struct Server::Impl {
  explicit Impl(const IntakeOptions& intake) : http(intake, ctx.metrics.refusals()) {}
  Context ctx;         // constructed first: http counts its refusals in ctx.metrics
  HttpServer http;     // destroyed first: its workers run handlers that use ctx
  int listen_fd = -1;  // kept to widen httplib's listen backlog after it binds
  std::mutex stop_mu;
  bool stopped = false;
};

namespace {

constexpr int kListenBacklog = 1024;  // the kernel caps it at net.core.somaxconn

// Compares without an early exit, so the time taken does not reveal how much of a key matched.
bool SameKey(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

bool Authorized(const ServerConfig& config, const httplib::Request& req) {
  if (config.api_key.empty() || req.path == "/health" || req.path == "/v1/health" ||
      req.path == "/")
    return true;
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  return auth.rfind(prefix, 0) == 0 && SameKey(auth.substr(prefix.size()), config.api_key);
}

Clock::duration FromSeconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

IntakeOptions Intake(const ServerConfig& c, int n_slots) {
  IntakeOptions o;
  o.workers = c.http_threads > 0 ? static_cast<size_t>(c.http_threads)
                                 : static_cast<size_t>(n_slots + c.max_queue + 8);
  o.head_timeout = FromSeconds(c.header_timeout_s);
  o.body_timeout = FromSeconds(c.body_timeout_s);
  o.max_connections = c.max_connections;
  o.max_connections_per_client = c.max_connections_per_client;
  o.max_body = c.max_body;
  o.read_timeout = FromSeconds(c.read_timeout_s);
  o.write_timeout = std::chrono::seconds(30);
  o.keep_alive = std::chrono::seconds(5);
  return o;
}

void Configure(httplib::Server& http, Context& ctx) {
  const ServerConfig& c = ctx.config;
  http.set_payload_max_length(c.max_body);
  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (Authorized(ctx.config, req)) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(ctx, res, 401, "invalid or missing API key (Authorization: Bearer KEY)");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (404, 413 oversized body, 400 unreadable request) get a JSON body too.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&ctx](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413) {
          // The transport's refusal, counted with the intake's 413 for a chunked body and not
          // also as a rejection (SendError's count). httplib sends it only for a Content-Length
          // over --max-body, before any route but after the pre-routing handler, so a request
          // answered 401 there is not counted as too large; the intake counts none of these (it
          // cannot know the answer), and this handler runs once per response: once in all.
          ctx.metrics.refusals().Count(LimitRefusal::kBodyTooLarge);
          SendJson(ctx, res, 413,
                   ErrorJson(413, "request body larger than --max-body " +
                                      std::to_string(ctx.config.max_body) + " bytes"));
          return httplib::Server::HandlerResponse::Handled;
        }
        const std::string message = res.status == 404 ? "no route " + req.method + " " + req.path
                                                      : "the request could not be read (HTTP " +
                                                            std::to_string(res.status) + ")";
        SendError(ctx, res, res.status, message);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [&ctx](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
        std::string what = "internal error";
        try {
          if (e) std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          what += std::string(": ") + ex.what();
        } catch (...) {
        }
        SendError(ctx, res, 500, what);
      });
}

}  // namespace

Server::Server(const ServedModel& served, const ServerConfig& config)
    : impl_(std::make_unique<Impl>(Intake(config, served.engine->options().n_seq_max))) {
  Context& ctx = impl_->ctx;
  ctx.served = served;
  ctx.config = config;
  ctx.started_unix = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  SchedulerOptions so;
  so.n_slots = served.engine->options().n_seq_max;
  so.max_queue = config.max_queue;
  ctx.scheduler = std::make_unique<Scheduler>(*served.engine, so, ctx.metrics);
  Configure(impl_->http, ctx);
  AddCompletionRoutes(impl_->http, ctx);
  AddInfoRoutes(impl_->http, ctx);
}

Server::~Server() {
  Stop();
}

Expected<int> Server::Bind() {
  const ServerConfig& c = impl_->ctx.config;
  if (!impl_->http.is_valid())
    return Status::Errorf("cannot create the server's event descriptors");
  impl_->http.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    impl_->listen_fd = sock;
  });
  int port = c.port;
  if (c.port == 0) {
    port = impl_->http.bind_to_any_port(c.host);
    if (port <= 0) return Status::Errorf("cannot bind {} on any port", c.host);
  } else if (!impl_->http.bind_to_port(c.host, c.port)) {
    return Status::Errorf("cannot bind {}:{} (in use, or not an address of this machine)", c.host,
                          c.port);
  }
  // httplib listens with a backlog of 5: a burst of clients connecting at once would have its
  // extra SYNs dropped and retried a second later. Listening again only resizes the queue.
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, kListenBacklog);
  return port;
}

void Server::Run() {
  impl_->http.listen_after_bind();
  impl_->http.Shutdown();  // also when listening failed: nothing else would stop the intake
}

void Server::Stop() {
  {
    std::lock_guard lock(impl_->stop_mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  // Running requests end (cancelled), and their streams write that last event before the
  // listener stops: httplib cuts a chunked response short once it is stopping (a test saw
  // streams end without their "cancelled" event). Bounded: a stalled client cannot hold it.
  impl_->ctx.scheduler->Shutdown();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (impl_->ctx.open_streams.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->http.stop();
  impl_->http.StopIntake();  // waits end: trickling or stalled clients cannot delay Run's return
}

}  // namespace lockstep::server

// `lockstep serve`'s HTTP server: OpenAI and llama-server routes over one engine thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/params.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (Bind returns it)
  std::string api_key;  // empty: no authentication
  size_t max_body = 1 << 20;
  int max_queue = 64;            // requests waiting for a slot before 429
  double timeout_s = 600;        // per request, from submission
  double read_timeout_s = 10;    // a client that sends nothing for this long is dropped
  double header_timeout_s = 10;  // a request's head (request line and headers), first byte to end
  double body_timeout_s = 30;    // a request's body, from the end of its head
  size_t max_connections = 256;  // open at once; more get 503 at once
  size_t max_connections_per_client = 64;  // open at once from one client (ClientKey); 0: none
  int http_threads = 0;                    // 0: slots + queue + a few for health and metrics
  std::string chat_template;               // empty: the model's own
  RequestDefaults defaults;
};

// What the server serves: the caller owns all of it and keeps it alive while the server runs.
struct ServedModel {
  const model::Model* target = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // may be null (prompts as ids only)
  engine::Engine* engine = nullptr;
  std::string id;           // the model name clients see (file name or --alias)
  nlohmann::json identity;  // the run identity: hashes computed once at load, build, settings
  bool speculative = false;
};

class Server {
 public:
  Server(const ServedModel& served, const ServerConfig& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port (useful with port 0).
  Expected<int> Bind();
  // Serves until Stop; returns once every handler has finished.
  void Run();
  // Thread-safe and idempotent: refuses new work, cancels running requests, stops listening.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::server

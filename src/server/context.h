// What every route handler shares (private to src/server), and the JSON/HTTP helpers they use.
#pragma once

#include <httplib.h>

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/server.h"

namespace lockstep::server {

struct Context {
  ServedModel served;
  ServerConfig config;
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  std::atomic<int64_t> next_id{1};
  int64_t started_unix = 0;
  // Event streams whose response has not finished: shutdown lets them write their last event
  // before it stops the listener (httplib ends chunked responses once it stops running).
  std::atomic<int> open_streams{0};
};

// A JSON response; objects carry the run identity so any two responses can be diffed.
void SendJson(const Context& ctx, httplib::Response& res, int status, nlohmann::json body);
// OpenAI's error shape ({"error": {message, type, param, code}}), which llama-server shares.
nlohmann::json ErrorJson(int status, const std::string& message);
void SendError(Context& ctx, httplib::Response& res, int status, const std::string& message);
// The body as a JSON object, or a 400 already sent (returns false).
bool ParseBody(Context& ctx, const httplib::Request& req, httplib::Response& res,
               nlohmann::json* body);
// JSON text that never throws on invalid UTF-8 (token pieces may split a character).
std::string Dump(const nlohmann::json& j);

void AddCompletionRoutes(httplib::Server& http, Context& ctx);
void AddInfoRoutes(httplib::Server& http, Context& ctx);

}  // namespace lockstep::server

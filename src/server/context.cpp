// JSON responses, the error shape, and body parsing shared by every route.
#include "server/context.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace lockstep::server {
namespace {

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Requests nest JSON no deeper than this. A body nested 200,000 arrays deep (400 KB, under the
// body limit) parsed fine but crashed the server with a stack overflow in the recursive copies
// the chat route makes; chat messages, tool schemas and sampling fields need a handful of levels.
constexpr int kMaxNesting = 64;

// The deepest nesting of arrays and objects in `text`, brackets inside strings not counted (a
// linear scan, so it can run before the recursive parse and copies).
int Nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void SendJson(const Context& ctx, httplib::Response& res, int status, nlohmann::json body) {
  if (body.is_object() && !body.contains("identity")) body["identity"] = ctx.served.identity;
  res.status = status;
  res.set_content(Dump(body), "application/json; charset=utf-8");
}

nlohmann::json ErrorJson(int status, const std::string& message) {
  return {
      {"error",
       {{"code", status}, {"message", message}, {"type", ErrorType(status)}, {"param", nullptr}}}};
}

void SendError(Context& ctx, httplib::Response& res, int status, const std::string& message) {
  ctx.metrics.OnRejected(status);
  SendJson(ctx, res, status, ErrorJson(status, message));
}

bool ParseBody(Context& ctx, const httplib::Request& req, httplib::Response& res,
               nlohmann::json* body) {
  if (Nesting(req.body) > kMaxNesting) {
    SendError(ctx, res, 400,
              fmt::format("the request body nests arrays and objects deeper than {} levels",
                          kMaxNesting));
    return false;
  }
  // Invalid UTF-8 inside strings is a parse error here too, so no later step sees it.
  *body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body->is_discarded()) {
    SendError(ctx, res, 400,
              req.body.empty() ? "empty request body: expected a JSON object"
                               : "the request body is not valid JSON");
    return false;
  }
  if (!body->is_object()) {
    SendError(ctx, res, 400, "the request body must be a JSON object");
    return false;
  }
  return true;
}

}  // namespace lockstep::server

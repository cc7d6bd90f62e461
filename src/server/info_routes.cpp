// The routes that run no generation: health, models, props, slots, metrics, tokenize,
// detokenize, and the chat page at /.
#include <string>

#include "core/version.h"
#include "server/context.h"
#include "server/web_page.h"

namespace lockstep::server {
namespace {

nlohmann::json ModelMeta(const Context& ctx) {
  const model::Model& m = *ctx.served.target;
  return {{"n_vocab", m.config().n_vocab},
          {"n_ctx_train", m.config().n_ctx_train},
          {"n_embd", m.config().n_embd},
          {"size", m.file().file_size()}};
}

nlohmann::json Props(const Context& ctx) {
  const RequestDefaults& d = ctx.config.defaults;
  const tokenizer::Tokenizer* tok = ctx.served.tokenizer;
  const std::string& tmpl = !ctx.config.chat_template.empty() ? ctx.config.chat_template
                            : tok                             ? tok->chat_template()
                                                              : std::string();
  const nlohmann::json params = {{"temperature", d.temperature},
                                 {"top_k", d.top_k},
                                 {"top_p", 1.0},
                                 {"min_p", 0.0},
                                 {"seed", d.seed},
                                 {"n_predict", -1},
                                 {"speculative.n_max", d.draft_max},
                                 {"speculative.p_min", d.draft_p_min}};
  return {{"default_generation_settings",
           {{"n_ctx", ctx.served.engine->options().n_ctx},
            {"speculative", ctx.served.speculative},
            {"params", params}}},
          {"total_slots", ctx.scheduler->n_slots()},
          {"model_alias", ctx.served.id},
          {"model_path", ctx.served.identity.value("model", "")},
          {"chat_template", tmpl},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", std::string(Version()) + "-" + GitHash()}};
}

void Tokenize(Context& ctx, const httplib::Request& req, httplib::Response& res) {
  nlohmann::json body;
  if (!ParseBody(ctx, req, res, &body)) return;
  const tokenizer::Tokenizer* tok = ctx.served.tokenizer;
  if (!tok) return SendError(ctx, res, 400, "the model has no tokenizer");
  FieldReader f(body);
  if (!f.Has("content")) return SendError(ctx, res, 400, "'content' is required");
  const std::string content = f.String("content", "");
  const bool add_special = f.Bool("add_special", false);
  const bool parse_special = f.Bool("parse_special", true);
  const bool with_pieces = f.Bool("with_pieces", false);
  if (!f.status().ok()) return SendError(ctx, res, 400, f.status().message());
  const std::vector<int32_t> ids = tok->Encode(content, add_special, parse_special);
  if (!with_pieces) return SendJson(ctx, res, 200, {{"tokens", ids}});
  nlohmann::json pieces = nlohmann::json::array();
  for (int32_t id : ids) pieces.push_back({{"id", id}, {"piece", tok->TokenToPiece(id, true)}});
  SendJson(ctx, res, 200, {{"tokens", std::move(pieces)}});
}

void Detokenize(Context& ctx, const httplib::Request& req, httplib::Response& res) {
  nlohmann::json body;
  if (!ParseBody(ctx, req, res, &body)) return;
  const tokenizer::Tokenizer* tok = ctx.served.tokenizer;
  if (!tok) return SendError(ctx, res, 400, "the model has no tokenizer");
  const auto tokens = body.find("tokens");
  if (tokens == body.end()) return SendError(ctx, res, 400, "'tokens' is required");
  Expected<std::vector<int32_t>> ids =
      ParseTokenIds(*tokens, ctx.served.target->config().n_vocab, "tokens");
  if (!ids.ok()) return SendError(ctx, res, 400, ids.status().message());
  SendJson(ctx, res, 200, {{"content", tok->Decode(*ids)}});
}

}  // namespace

void AddInfoRoutes(httplib::Server& http, Context& ctx) {
  for (const char* path : {"/health", "/v1/health"})
    http.Get(path, [&ctx](const httplib::Request&, httplib::Response& res) {
      SendJson(ctx, res, 200, {{"status", "ok"}});
    });
  for (const char* path : {"/v1/models", "/models"})
    http.Get(path, [&ctx](const httplib::Request&, httplib::Response& res) {
      const nlohmann::json model = {{"id", ctx.served.id},
                                    {"object", "model"},
                                    {"created", ctx.started_unix},
                                    {"owned_by", "lockstep"},
                                    {"meta", ModelMeta(ctx)}};
      SendJson(ctx, res, 200, {{"object", "list"}, {"data", nlohmann::json::array({model})}});
    });
  http.Get("/props", [&ctx](const httplib::Request&, httplib::Response& res) {
    SendJson(ctx, res, 200, Props(ctx));
  });
  http.Get("/slots", [&ctx](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json slots = ctx.scheduler->Slots();
    bool any_free = false;
    for (const auto& s : slots) any_free = any_free || !s["is_processing"].get<bool>();
    if (req.get_param_value("fail_on_no_slot") == "1" && !any_free)
      return SendError(ctx, res, 503, "no slot available");
    SendJson(ctx, res, 200, std::move(slots));
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics.Render(), "text/plain; version=0.0.4");
  });
  http.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Tokenize(ctx, req, res);
  });
  http.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Detokenize(ctx, req, res);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = WebPage();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
}

}  // namespace lockstep::server

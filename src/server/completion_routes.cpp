// POST /v1/completions, /v1/chat/completions and /completion: validate, build the prompt, queue
// the job, then answer whole or as server-sent events while the engine thread produces tokens.
#include <chrono>
#include <exception>

#include "server/context.h"
#include "server/formats.h"
#include "tokenizer/chat_template.h"

namespace lockstep::server {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPollSlice(100);
// A whole (non-streamed) response is waited for this long before the server commits to a 200
// and starts sending whitespace (valid before a JSON value) to notice a client that went away.
constexpr milliseconds kWholeWait(1000);
constexpr milliseconds kHeartbeat(1000);

struct Prepared {
  Api api = Api::kCompletions;
  std::vector<int32_t> prompt;
  CompletionParams params;
};

// The chat request's messages through the chat template, as text that starts with <bos>.
Expected<std::string> ChatText(const Context& ctx, const nlohmann::json& body) {
  const tokenizer::Tokenizer* tok = ctx.served.tokenizer;
  if (!tok) return Status::Error("the model has no tokenizer: chat needs one");
  const auto messages = body.find("messages");
  if (messages == body.end()) return Status::Error("'messages' is required");
  LS_RETURN_IF_ERROR(CheckMessages(*messages));
  const std::string& tmpl =
      ctx.config.chat_template.empty() ? tok->chat_template() : ctx.config.chat_template;
  if (tmpl.empty())
    return Status::Error(
        "the model has no chat template; start the server with --chat-template-file");
  tokenizer::ChatOptions opt;
  if (tok->bos_id() >= 0) opt.bos_token = tok->token_text(tok->bos_id());
  FieldReader f(body);
  opt.add_generation_prompt = f.Bool("add_generation_prompt", true);
  if (const auto tools = body.find("tools"); tools != body.end() && tools->is_array())
    opt.tools = *tools;
  if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && kw->is_object()) {
    FieldReader k(*kw);
    if (k.Has("enable_thinking")) opt.enable_thinking = k.Bool("enable_thinking", false);
    LS_RETURN_IF_ERROR(k.status().WithContext("chat_template_kwargs"));
  }
  LS_RETURN_IF_ERROR(f.status());
  Expected<std::string> text = Status::Error("chat template failed");
  try {
    text = tokenizer::RenderChat(tmpl, *messages, opt);
  } catch (const std::exception& e) {
    return Status::Errorf("chat template: {}", e.what());
  }
  return text;
}

Expected<std::vector<int32_t>> ChatPrompt(const Context& ctx, const nlohmann::json& body) {
  LS_ASSIGN_OR_RETURN(const std::string text, ChatText(ctx, body));
  return ctx.served.tokenizer->Encode(text, /*add_bos=*/false, /*parse_special=*/true);
}

// Resolves n_predict against the context: unlimited becomes "until the context is full".
Status Fit(const Context& ctx, Prepared* p) {
  const int n_ctx = ctx.served.engine->options().n_ctx;
  const int n_prompt = static_cast<int>(p->prompt.size());
  if (n_prompt >= n_ctx)
    return Status::Errorf("the prompt has {} tokens; the context holds {} (prompt + output)",
                          n_prompt, n_ctx);
  if (p->params.n_predict < 0) p->params.n_predict = n_ctx - n_prompt;
  if (n_prompt + p->params.n_predict > n_ctx)
    return Status::Errorf("prompt ({} tokens) + max_tokens ({}) exceeds the context ({})", n_prompt,
                          p->params.n_predict, n_ctx);
  return Status::Ok();
}

Expected<Prepared> Prepare(const Context& ctx, const nlohmann::json& body, Api api) {
  Prepared p;
  p.api = api;
  LS_ASSIGN_OR_RETURN(p.params, ParseCompletion(body, api, ctx.config.defaults));
  if (api == Api::kChat) {
    LS_ASSIGN_OR_RETURN(p.prompt, ChatPrompt(ctx, body));
  } else {
    const auto prompt = body.find("prompt");
    if (prompt == body.end()) return Status::Error("'prompt' is required");
    LS_ASSIGN_OR_RETURN(
        p.prompt, ParsePrompt(*prompt, ctx.served.tokenizer, ctx.served.target->config().n_vocab));
  }
  LS_RETURN_IF_ERROR(Fit(ctx, &p));
  return p;
}

Job MakeJob(const Context& ctx, const Prepared& p) {
  Job job;
  engine::Request& r = job.request;
  r.prompt = p.prompt;
  r.n_predict = p.params.n_predict;
  r.sampling = p.params.sampling;
  if (ctx.served.tokenizer && !p.params.ignore_eos) r.stop_tokens = ctx.served.tokenizer->eog_ids();
  r.draft_max = p.params.draft_max;
  r.draft_p_min = p.params.draft_p_min;
  r.record_rounds = p.params.draft_rounds;
  job.n_probs = p.params.n_probs;
  job.summary = p.params.Settings();
  return job;
}

ResponseInfo Info(Context& ctx, const Prepared& p) {
  ResponseInfo info;
  info.api = p.api;
  info.id = (p.api == Api::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(ctx.next_id++);
  info.created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  info.model = ctx.served.id;
  info.prompt = p.prompt;
  info.params = p.params;
  info.tok = ctx.served.tokenizer;
  info.identity = ctx.served.identity;
  return info;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The state one response's content provider carries between calls.
struct Responder {
  Context& ctx;
  std::shared_ptr<Generation> gen;
  std::unique_ptr<ResponseFormat> format;
  bool first_seen = false;

  bool Next(milliseconds slice, Delta* d) {
    const bool over = gen->Next(slice, d);
    if (!first_seen && gen->first_token_seen()) {
      first_seen = true;
      ctx.metrics.OnFirstToken(SecondsSince(gen->stream().submitted()));
    }
    if (over) ctx.metrics.OnResponse(SecondsSince(gen->stream().submitted()));
    return over;
  }
  // A failure after the 200 went out: the body (or last event) says so instead.
  nlohmann::json ErrorBody() const { return ErrorJson(500, gen->error().message()); }
};

void Stream(std::shared_ptr<Responder> r, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  ++r->ctx.open_streams;
  res.set_chunked_content_provider(
      "text/event-stream",
      [r](size_t, httplib::DataSink& sink) {
        Delta d;
        const bool over = r->Next(kPollSlice, &d);
        std::string out = r->format->Chunk(d, *r->gen);
        if (over) out += r->gen->error().ok() ? r->format->End(*r->gen) : SseEvent(r->ErrorBody());
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (over) sink.done();
        return true;
      },
      [r](bool) {
        r->gen->Cancel();  // no-op when it ended; else the client went away
        --r->ctx.open_streams;
      });
}

void Whole(std::shared_ptr<Responder> r, httplib::Response& res) {
  Delta ignored;  // the generation keeps the whole output itself
  const Clock::time_point until = Clock::now() + kWholeWait;
  bool over = false;
  while (!over && Clock::now() < until) over = r->Next(kPollSlice, &ignored);
  if (over) {
    if (!r->gen->error().ok()) return SendError(r->ctx, res, 500, r->gen->error().message());
    return SendJson(r->ctx, res, 200, r->format->Whole(*r->gen));
  }
  res.set_header("Cache-Control", "no-cache");
  auto last_write = std::make_shared<Clock::time_point>(Clock::now());
  res.set_chunked_content_provider(
      "application/json",
      [r, last_write](size_t, httplib::DataSink& sink) {
        Delta d;
        if (!r->Next(kPollSlice, &d)) {
          if (Clock::now() - *last_write < kHeartbeat) return true;
          *last_write = Clock::now();
          return sink.write(" ", 1);
        }
        const std::string body =
            Dump(r->gen->error().ok() ? r->format->Whole(*r->gen) : r->ErrorBody());
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [r](bool) { r->gen->Cancel(); });
}

void Complete(Context& ctx, const httplib::Request& req, httplib::Response& res, Api api) {
  ctx.metrics.OnRequest();
  nlohmann::json body;
  if (!ParseBody(ctx, req, res, &body)) return;
  Expected<Prepared> p = Prepare(ctx, body, api);
  if (!p.ok()) return SendError(ctx, res, 400, p.status().message());
  Refusal why = Refusal::kNone;
  std::shared_ptr<RequestStream> stream = ctx.scheduler->Submit(MakeJob(ctx, *p), &why);
  if (!stream) {
    if (why == Refusal::kQueueFull) {
      res.set_header("Retry-After", "1");
      return SendError(ctx, res, 429, "too many requests queued; retry later");
    }
    return SendError(ctx, res, 503, "the server is shutting down");
  }
  const Clock::time_point deadline =
      stream->submitted() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(ctx.config.timeout_s));
  auto r = std::make_shared<Responder>(
      Responder{ctx,
                std::make_shared<Generation>(*ctx.scheduler, stream, ctx.served.tokenizer,
                                             p->params.stop, deadline),
                MakeFormat(Info(ctx, *p))});
  if (p->params.stream) return Stream(std::move(r), res);
  Whole(std::move(r), res);
}

}  // namespace

void AddCompletionRoutes(httplib::Server& http, Context& ctx) {
  // llama-server's: the templated prompt a chat request would run, without running it.
  http.Post("/apply-template", [&ctx](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body;
    if (!ParseBody(ctx, req, res, &body)) return;
    Expected<std::string> text = ChatText(ctx, body);
    if (!text.ok()) return SendError(ctx, res, 400, text.status().message());
    SendJson(ctx, res, 200, {{"prompt", *text}});
  });
  for (auto [path, api] : {std::pair{"/v1/completions", Api::kCompletions},
                           {"/completions", Api::kCompletions},
                           {"/v1/chat/completions", Api::kChat},
                           {"/chat/completions", Api::kChat},
                           {"/completion", Api::kLlama}}) {
    http.Post(path, [&ctx, api](const httplib::Request& req, httplib::Response& res) {
      Complete(ctx, req, res, api);
    });
  }
}

}  // namespace lockstep::server

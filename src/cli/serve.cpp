// `lockstep serve`: the OpenAI- and llama-server-compatible HTTP server over the engine.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/load.h"
#include "cli/prompt_text.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "server/server.h"

namespace lockstep::cli {
namespace {

struct Args {
  LoadOptions load;
  server::ServerConfig server;
  std::string alias, chat_template_file;
  std::string cache_type_k = "f32", cache_type_v = "f32";
  int ctx = 0, parallel = 4, draft_max = 3, prefill_chunk = 256;
  int draft_rows = -1;  // -1: the backend's default (DraftRowsFor)
  bool no_hash = false;
};

void AddOptions(CLI::App& app, Args& a) {
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("-m,--model", a.load.model, "target model GGUF (default: the embedded default)");
  app.add_option("--draft,--model-draft,--spec-draft-model", a.load.draft,
                 "Gemma 4 assistant drafter GGUF: speculative decoding (also -md)");
  app.add_option("--draft-max,--spec-draft-n-max", a.draft_max,
                 "most tokens drafted per round (requests may ask fewer: speculative.n_max)")
      ->check(CLI::Range(1, 32));
  app.add_option("--draft-rows", a.draft_rows,
                 "rows of a step that drafts may fill, decode rows counted first (0: no limit; "
                 "-1: 8 on the CPU, where a step of many rows is bound by arithmetic, no limit "
                 "on CUDA); output never changes")
      ->check(CLI::Range(-1, 65536));
  app.add_option("--draft-p-min,--spec-draft-p-min", a.server.defaults.draft_p_min,
                 "default: stop drafting below this draft probability")
      ->check(FiniteNumber() & CLI::Range(0.0f, 1.0f));
  app.add_option("-c,--ctx-size", a.ctx,
                 "positions per slot, prompt + output (0: the model's trained context, at most "
                 "8192)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--parallel", a.parallel, "slots: sequences decoded together (also -np)")
      ->check(CLI::Range(1, 256));
  app.add_option("-t,--threads", a.load.threads, "CPU threads (never changes the output)")
      ->check(CLI::Range(1, 256));
  app.add_option("--host", a.server.host, "address to listen on")->capture_default_str();
  app.add_option("--port", a.server.port, "port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", a.server.api_key,
                 "require 'Authorization: Bearer KEY' on every route but /health and /");
  app.add_option("--max-body", a.server.max_body, "largest request body in bytes")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-queue", a.server.max_queue,
                 "requests waiting for a slot before new ones get 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--timeout", a.server.timeout_s,
                 "seconds a request may run (from arrival); then it ends with finish_reason "
                 "length")
      ->check(FiniteNumber() & CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_option("--read-timeout", a.server.read_timeout_s,
                 "seconds a client may stay silent while sending a request")
      ->check(FiniteNumber() & CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--header-timeout", a.server.header_timeout_s,
                 "seconds a client may take to send a request's line and headers, from its "
                 "first byte (then 408 and the connection closes)")
      ->check(FiniteNumber() & CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--body-timeout", a.server.body_timeout_s,
                 "seconds a client may take to send a request's body, from the end of its "
                 "headers (then 408 and the connection closes)")
      ->check(FiniteNumber() & CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--max-connections", a.server.max_connections,
                 "client connections open at once; more get 503 (Retry-After: 1) and are closed")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-connections-per-client", a.server.max_connections_per_client,
                 "client connections open at once from one client: an IPv4 address or an IPv6 /64 "
                 "(0: no limit); more get 503 "
                 "(Retry-After: 1) and are closed. Behind a reverse proxy all clients share its "
                 "address: raise it or use 0")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--temp", a.server.defaults.temperature, "default temperature (0 = greedy)")
      ->check(FiniteNumber() & CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  app.add_option("--top-k", a.server.defaults.top_k, "default top-k (0 = whole vocabulary)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-s,--seed", a.server.defaults.seed,
                 "default seed (-1: a random seed per request, reported in its response)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  app.add_option("--alias", a.alias, "model name clients see (default: the file name)");
  app.add_option("--chat-template-file", a.chat_template_file,
                 "chat template (Jinja) for /v1/chat/completions instead of the model's own");
  app.add_option("--cache-type-k", a.cache_type_k, "KV cache type for K: f32, f16, bf16")
      ->check(CacheTypeName());
  app.add_option("--cache-type-v", a.cache_type_v, "KV cache type for V: f32, f16, bf16")
      ->check(CacheTypeName());
  app.add_option("--prefill-chunk,--ubatch-size", a.prefill_chunk,
                 "prompt rows a sequence adds per step (also -ub; never changes the output)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--device", a.load.device, "backend: auto, cpu or cuda");
  app.add_option("--gpu-layers,--n-gpu-layers", a.load.gpu_layers,
                 "accepted for llama.cpp command lines (also -ngl); every layer runs on --device");
  app.add_flag("--no-hash", a.no_hash, "do not hash the model files for the identity block");
}

// On the CPU a step's cost grows with its rows from a few rows on, so drafts for many
// sequences at once cost more than their accepted tokens save (serve_bench, default pair, 2
// threads, session 18: 16 clients 2,219 -> 2,778 tok/s with 8, 8 clients 1,965 -> 2,371, one
// client unchanged); a GPU step of a few dozen rows is still bound by reading the weights.
int DraftRowsFor(const Args& a, const backend::Backend& b) {
  if (a.draft_rows >= 0) return a.draft_rows;
  return b.name() == "cpu" ? engine::kCpuDraftRows : 0;
}

Expected<engine::Options> EngineOptions(const Args& a, const LoadedModels& m) {
  engine::Options o;
  o.n_seq_max = a.parallel;
  o.n_ctx = a.ctx > 0 ? a.ctx : std::min(8192, std::max(2, m.target->config().n_ctx_train));
  WarnBeyondTrainedContext(a.ctx, m.target->config().n_ctx_train);
  o.prefill_chunk = a.prefill_chunk;
  o.draft_max = m.proposer ? a.draft_max : 0;
  o.draft_rows = DraftRowsFor(a, *m.backend);
  LS_ASSIGN_OR_RETURN(o.cache_type_k, kv::ParseCacheType(a.cache_type_k));
  LS_ASSIGN_OR_RETURN(o.cache_type_v, kv::ParseCacheType(a.cache_type_v));
  return o;
}

nlohmann::json ServerSettings(const Args& a, const engine::Options& o) {
  return {{"ctx", o.n_ctx},
          {"parallel", o.n_seq_max},
          {"draft_max", o.draft_max},
          {"draft_rows", o.draft_rows},
          {"prefill_chunk", o.prefill_chunk},
          {"cache_type_k", a.cache_type_k},
          {"cache_type_v", a.cache_type_v}};
}

// SIGPIPE would kill the process when a client disconnects mid-write; a failed write is how
// the server notices the disconnect instead. Restored when serving ends.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() : old_(std::signal(SIGPIPE, SIG_IGN)) {}
  ~IgnoreSigpipe() { std::signal(SIGPIPE, old_); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  void (*old_)(int);
};

int Run(Args a) {
  if (!a.chat_template_file.empty()) {
    std::ifstream in(a.chat_template_file);
    if (!in) return Fail(Status::Errorf("{}: cannot open", a.chat_template_file));
    std::stringstream text;
    text << in.rdbuf();
    a.server.chat_template = text.str();
  }
  a.load.max_drafting = a.parallel;
  auto loaded = LoadModels(a.load);
  if (!loaded.ok()) return Fail(loaded.status());
  LoadedModels& m = *loaded;
  auto opt = EngineOptions(a, m);
  if (!opt.ok()) return Fail(opt.status());
  auto engine = engine::Engine::Create(*m.target, m.proposer.get(), *opt);
  if (!engine.ok()) return Fail(engine.status());
  a.server.defaults.draft_max = opt->draft_max;

  const RunRecord rec{"serve",           m.model_path,         a.load.draft,
                      m.backend->name(), m.backend->threads(), !a.no_hash};
  server::ServedModel served;
  served.target = m.target.get();
  served.tokenizer = m.tokenizer.get();
  served.engine = engine->get();
  served.speculative = m.proposer != nullptr;
  served.identity = IdentityJson(rec, ServerSettings(a, *opt), {}, {});  // hashes files once
  served.identity.erase("prompt_sha256");  // per response, as the output's
  served.identity.erase("output_sha256");
  served.id = !a.alias.empty() ? a.alias : served.identity.value("model", m.model_path);

  const std::string& host = a.server.host;
  if (a.server.api_key.empty() && host != "127.0.0.1" && host != "localhost" && host != "::1")
    std::fprintf(stderr,
                 "lockstep serve: warning: listening on %s without --api-key: anyone who can "
                 "reach this address can use the model\n",
                 host.c_str());
  IgnoreSigpipe no_sigpipe;
  InterruptGuard interrupt;
  server::Server srv(served, a.server);
  auto port = srv.Bind();
  if (!port.ok()) return Fail(port.status());
  std::printf("lockstep serve: listening on http://%s:%d (model %s, %d slots of %d positions%s)\n",
              a.server.host.c_str(), *port, served.id.c_str(), opt->n_seq_max, opt->n_ctx,
              served.speculative ? ", speculative" : "");
  std::fflush(stdout);
  // The signal handler only sets a flag; this thread turns it into an orderly stop.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load() && !interrupt.interrupted())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    srv.Stop();
  });
  srv.Run();
  done.store(true);
  watcher.join();
  std::fprintf(stderr, "lockstep serve: stopped\n");
  return 0;
}

}  // namespace

int Serve(int argc, char** argv) {
  CLI::App app{
      "Serve a Gemma 4 model over HTTP: OpenAI /v1/completions, /v1/chat/completions, "
      "/v1/models and llama-server's /completion, /tokenize, /detokenize, /health, /props, "
      "/slots, /metrics. Every response's tokens are byte-identical to the same request run "
      "alone, whatever else is in flight.",
      "lockstep serve"};
  Args a;
  a.load.threads = PhysicalCores();  // as generate, chat and lab
  AddOptions(app, a);
  if (const int rc = ParseWithLlamaAliases(app, argc, argv); rc >= 0) return rc;
  return Run(a);
}

}  // namespace lockstep::cli

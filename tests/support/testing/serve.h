// An in-process `lockstep serve` on an ephemeral port, and the HTTP helpers its tests and the
// serve benchmark use (include <httplib.h> with the library's pkg-config defines).
#pragma once

#include <httplib.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/load.h"
#include "engine/engine.h"
#include "server/server.h"
#include "testing/child.h"

namespace lockstep::testing {

struct ServeSetup {
  std::string model, draft;  // empty draft: no speculation
  int parallel = 8;
  int ctx = 512;
  int draft_max = 3;
  int draft_rows = 0;           // engine::Options::draft_rows
  int threads = 1;              // never changes a token; one thread waits least on a busy machine
  server::ServerConfig config;  // port is forced to 0 (any free port)
};

// The default target model in the source tree; a clone without it skips the tests that need it.
inline std::string DefaultTargetPath() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-target.gguf";
}
inline bool DefaultTargetMissing() {
  return !std::filesystem::exists(DefaultTargetPath());
}

// The transport-limit tests' server: the default target, one slot, one queued request beyond it
// (so 1 + 1 + 8 = 10 HTTP workers), a 512-token context. Each test then sets its limit.
inline ServeSetup OneSlotSetup() {
  ServeSetup s;
  s.model = DefaultTargetPath();
  s.parallel = 1;
  s.ctx = 512;
  s.config.max_queue = 1;
  return s;
}

// Loads the models, starts the server on a background thread, stops it on destruction.
class InProcessServer {
 public:
  explicit InProcessServer(ServeSetup setup) : setup_(std::move(setup)) {}
  ~InProcessServer() { Stop(); }

  // An empty string when started; else what went wrong.
  std::string Start() {
    std::signal(SIGPIPE, SIG_IGN);  // a disconnecting client must not kill the test process
    cli::LoadOptions lo;
    lo.model = setup_.model;
    lo.draft = setup_.draft;
    lo.threads = setup_.threads;
    lo.max_drafting = setup_.parallel;
    auto loaded = cli::LoadModels(lo);
    if (!loaded.ok()) return loaded.status().message();
    models_ = std::make_unique<cli::LoadedModels>(std::move(*loaded));
    engine::Options eo;
    eo.n_seq_max = setup_.parallel;
    eo.n_ctx = setup_.ctx;
    eo.draft_max = models_->proposer ? setup_.draft_max : 0;
    eo.draft_rows = setup_.draft_rows;
    auto engine = engine::Engine::Create(*models_->target, models_->proposer.get(), eo);
    if (!engine.ok()) return engine.status().message();
    engine_ = std::move(*engine);
    server::ServedModel served;
    served.target = models_->target.get();
    served.tokenizer = models_->tokenizer.get();
    served.engine = engine_.get();
    served.speculative = models_->proposer != nullptr;
    served.id = "test-model";
    served.identity = {{"model", "test-model"}, {"model_sha256", "not computed (test)"}};
    server::ServerConfig config = setup_.config;
    config.port = 0;
    config.defaults.draft_max = eo.draft_max;
    server_ = std::make_unique<server::Server>(served, config);
    auto port = server_->Bind();
    if (!port.ok()) return port.status().message();
    port_ = *port;
    thread_ = std::thread([this] { server_->Run(); });
    return "";
  }

  void Stop() {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  const tokenizer::Tokenizer* tokenizer() const { return models_->tokenizer.get(); }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(60, 0);
    return c;
  }

 private:
  ServeSetup setup_;
  std::unique_ptr<cli::LoadedModels> models_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// A `lockstep serve` child process listening on a free port; killed on destruction unless
// StopServe stopped it (a failing assertion must not leave a server running).
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;  // 0: it did not start (its first line of output is in `line`)
  std::string line;

  ServeProcess() = default;
  ServeProcess(ServeProcess&& other) noexcept
      : pid(std::exchange(other.pid, -1)), port(other.port), line(std::move(other.line)) {}
  ServeProcess& operator=(ServeProcess&&) = delete;
  ~ServeProcess() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

// Starts `binary serve ARGS --port 0` and reads the port from its "listening on" line (waiting
// at most two minutes for it).
inline ServeProcess SpawnServe(const std::string& binary, std::vector<std::string> args) {
  args.insert(args.begin(), {binary, "serve"});
  args.insert(args.end(), {"--port", "0"});
  int out[2];
  ServeProcess p;
  if (::pipe(out) != 0) return p;
  p.pid = Spawn(std::move(args), out[1], /*merge_stderr=*/false);
  ::close(out[1]);
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  // A quiet half second is not the end: under load the server can take longer to load and
  // print its address (the loop once gave up after 500 ms). Only the deadline or the pipe's
  // end (the process exited) stops it.
  bool ended = false;
  while (p.line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < until &&
         !ended) {
    ReadSome(out[0], &p.line, std::chrono::milliseconds(500), &ended);
  }
  ::close(out[0]);  // later output goes nowhere; the server ignores SIGPIPE
  const size_t at = p.line.find("127.0.0.1:");
  if (at != std::string::npos) p.port = std::atoi(p.line.c_str() + at + 10);
  return p;
}

// SIGTERM, then the exit code (-1 when it did not exit normally or within a minute).
inline int StopServe(ServeProcess& p) {
  if (p.pid <= 0) return -1;
  ::kill(p.pid, SIGTERM);
  const int status = WaitOrKill(std::exchange(p.pid, -1), std::chrono::seconds(60));
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The JSON payloads of a server-sent event stream, without the final [DONE] (counted in *done).
inline std::vector<nlohmann::json> SseEvents(const std::string& body, int* done = nullptr) {
  std::vector<nlohmann::json> events;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      if (done) ++*done;
      continue;
    }
    events.push_back(nlohmann::json::parse(data, nullptr, false));
  }
  return events;
}

// POSTs a JSON body; the response body is kept whole (streamed responses included).
inline httplib::Result PostJson(httplib::Client& c, const std::string& path,
                                const nlohmann::json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

}  // namespace lockstep::testing

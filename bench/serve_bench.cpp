// `lockstep serve` under N concurrent streaming clients: requests/s, output tokens/s, time to
// first token and inter-token latency percentiles, and whether every output equals its N = 1 run.
// Every request is the same length (ignore_eos) and greedy; the server runs in-process on a free
// port with as many slots as the largest N. Options: kUsage below, or `serve_bench --help`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_common.h"
#include "engine/engine.h"
#include "testing/serve.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

constexpr bench::Usage kUsage{
    "serve_bench",
    "usage: serve_bench [options]\n"
    "Throughput, latency and exactness of an in-process `lockstep serve` under N clients.\n"
    "  --model FILE        target model\n"
    "                      (default " LOCKSTEP_SOURCE_DIR
    "/models/lockstep-code-target.gguf)\n"
    "  --draft FILE|none   drafter, none: no speculation\n"
    "                      (default " LOCKSTEP_SOURCE_DIR
    "/models/lockstep-code-assistant.gguf)\n"
    "  --clients N,N,...   concurrent clients, one table row per level (default 1,4,16,32)\n"
    "  --requests R        requests per level (default 32)\n"
    "  --tokens N          tokens per request, end of sequence ignored (default 64)\n"
    "  --threads T         server threads (default 2)\n"
    "  --draft-rows N      rows of a step drafts may fill, decode rows first (default 8,\n"
    "                      lockstep serve's CPU default; 0: no limit)\n"
    "  -h, --help          print this and exit\n"};

struct Args {
  std::string model = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-target.gguf";
  std::string draft = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-assistant.gguf";
  std::vector<int> clients{1, 4, 16, 32};
  int requests = 32, tokens = 64, threads = 2, draft_rows = engine::kCpuDraftRows;
};

const char* const kPrompts[] = {"def fibonacci(n):",       "class Stack:\n    def __init__(self):",
                                "import os\nimport sys\n", "def add(a, b):",
                                "for i in range(10):",     "def main():\n"};

struct Sample {
  double ttft_ms = 0;
  std::vector<double> gaps_ms;  // between token-carrying events, per token
  std::vector<int32_t> tokens;  // the ids, for the exactness check
  int n_tokens = 0;
};

Sample OneRequest(httplib::Client& c, int prompt, int n_tokens) {
  Sample s;
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  std::string pending;
  httplib::Request req;
  req.method = "POST";
  req.path = "/completion";
  req.set_header("Content-Type", "application/json");
  req.body =
      nlohmann::json{{"prompt", kPrompts[prompt]}, {"n_predict", n_tokens}, {"ignore_eos", true},
                     {"temperature", 0},           {"stream", true},        {"cache_prompt", false}}
          .dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      const auto j = nlohmann::json::parse(event.substr(6), nullptr, false);
      const int k =
          j.is_object() && j.contains("tokens") ? static_cast<int>(j["tokens"].size()) : 0;
      if (k == 0) continue;
      const Clock::time_point now = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - last).count();
      if (s.n_tokens == 0)
        s.ttft_ms = ms;
      else
        for (int i = 0; i < k; ++i) s.gaps_ms.push_back(ms / k);
      last = now;
      s.n_tokens += k;
      for (const auto& t : j["tokens"]) s.tokens.push_back(t.get<int32_t>());
    }
    return true;
  };
  c.send(req);
  return s;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

struct Level {
  double seconds = 0;
  std::vector<Sample> samples;  // by request index
};

Level RunLevel(const testing::InProcessServer& server, int n_clients, const Args& a) {
  Level level;
  level.samples.resize(static_cast<size_t>(a.requests));
  std::atomic<int> next{0};
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < n_clients; ++c)
    threads.emplace_back([&] {
      auto client = server.Client();
      for (int i; (i = next++) < a.requests;)
        level.samples[static_cast<size_t>(i)] = OneRequest(*client, i % 6, a.tokens);
    });
  for (auto& t : threads) t.join();
  level.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return level;
}

Args Parse(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (k == "--model") {
      a.model = value();
    } else if (k == "--draft") {
      const std::string v = value();
      a.draft = v == "none" ? "" : v;
    } else if (k == "--requests") {
      a.requests = std::atoi(value());
    } else if (k == "--tokens") {
      a.tokens = std::atoi(value());
    } else if (k == "--threads") {
      a.threads = std::atoi(value());
    } else if (k == "--draft-rows") {
      a.draft_rows = std::atoi(value());
      if (a.draft_rows < 0) kUsage.Error(k + ": a negative row count");
    } else if (k == "--clients") {
      a.clients.clear();
      std::stringstream ss(value());
      for (std::string n; std::getline(ss, n, ',');) {
        a.clients.push_back(std::atoi(n.c_str()));
        if (a.clients.back() < 1) kUsage.Error(k + ": '" + n + "' is not a positive integer");
      }
      if (a.clients.empty()) kUsage.Error(k + ": an empty list");
    } else {
      kUsage.Unknown(k);
    }
  }
  return a;
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  testing::ServeSetup setup;
  setup.model = a.model;
  setup.draft = a.draft;
  setup.threads = a.threads;
  setup.draft_rows = a.draft_rows;
  setup.parallel = *std::max_element(a.clients.begin(), a.clients.end());
  setup.ctx = 32 + a.tokens;
  setup.config.max_queue = a.requests;
  testing::InProcessServer server(setup);
  if (const std::string e = server.Start(); !e.empty()) {
    std::fprintf(stderr, "serve_bench: %s\n", e.c_str());
    return 1;
  }
  std::printf(
      "| clients | req/s | out tok/s | vs N=1 | TTFT p50 | p90 | p99 ms | ITL p50 | p90 | "
      "p99 ms | exact |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::vector<int32_t>> reference;  // tokens per prompt at the first level
  double base_tps = 0;
  for (int n : a.clients) {
    const Level level = RunLevel(server, n, a);
    std::vector<double> ttft, gaps;
    int64_t total = 0;
    int short_outputs = 0, differing = 0;
    for (size_t i = 0; i < level.samples.size(); ++i) {
      const Sample& s = level.samples[i];
      ttft.push_back(s.ttft_ms);
      gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
      total += s.n_tokens;
      if (reference.size() < 6) reference.push_back(s.tokens);
      short_outputs += s.n_tokens != a.tokens;
      differing += s.tokens != reference[i % 6];
    }
    const double tps = static_cast<double>(total) / level.seconds;
    if (base_tps == 0) base_tps = tps;
    const std::string exact =
        short_outputs + differing == 0
            ? "yes"
            : fmt::format("NO ({} short, {} differ)", short_outputs, differing);
    std::printf("| %d | %.2f | %.1f | %.2fx | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %s |\n", n,
                a.requests / level.seconds, tps, tps / base_tps, Percentile(ttft, 0.5),
                Percentile(ttft, 0.9), Percentile(ttft, 0.99), Percentile(gaps, 0.5),
                Percentile(gaps, 0.9), Percentile(gaps, 0.99), exact.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  return lockstep::Main(argc, argv);
}

// Multi-sequence decode through the engine: aggregate and per-sequence tokens/s, ms per step and
// the ratio to one sequence for N sequences decoding together, next to plain engine::Generate,
// the read bandwidth and the KV bytes per sequence of a 26B-A4B-shaped cache against llama.cpp.
// Options: kUsage below, or `engine_bench --help`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_common.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "read_bandwidth.h"
#include "testing/kv_shapes.h"
#include "testing/models.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kPromptLen = 16;

struct Args {
  std::string model, device = "cpu";
  int threads = 2, tokens = 32, reps = 3;
  std::vector<int> seqs{1, 2, 4, 8, 16};
  DType cache = DType::F32;  // K and V cache element type
  bool json = false;
};

[[noreturn]] void Die(const Status& s) {
  std::fprintf(stderr, "engine_bench: %s\n", s.message().c_str());
  std::exit(1);
}

constexpr bench::Usage kUsage{
    "engine_bench",
    "usage: engine_bench [options]\n"
    "Multi-sequence decode through the engine next to plain Generate, tokens/s and bandwidth.\n"
    "  --model FILE                the target (default: the synthetic BandwidthSpec target,\n"
    "                              262,144-token vocabulary, F16, ~1.26 GB, written once to\n"
    "                              the temp directory's lockstep-bench/bandwidth-F16.gguf)\n"
    "  --device cpu|cuda           backend (default cpu)\n"
    "  --threads N                 CPU threads (default 2)\n"
    "  --tokens N                  timed decode steps per run (default 32)\n"
    "  --seqs N,N,...              sequences decoding together, one row each (default\n"
    "                              1,2,4,8,16)\n"
    "  --reps R                    runs per row; medians are shown (default 3)\n"
    "  --cache-type f32|f16|bf16   K and V cache element type (default f32)\n"
    "  --json                      one JSON object instead of the table (default: table)\n"
    "  -h, --help                  print this and exit\n"};

Args ParseArgs(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (k == "--json") {
      a.json = true;
    } else if (k == "--model") {
      a.model = value();
    } else if (k == "--device") {
      a.device = value();
    } else if (k == "--threads") {
      a.threads = std::max(1, std::atoi(value()));
    } else if (k == "--tokens") {
      a.tokens = std::max(1, std::atoi(value()));
    } else if (k == "--reps") {
      a.reps = std::max(1, std::atoi(value()));
    } else if (k == "--seqs") {
      a.seqs = kUsage.PositiveInts(k, value());
    } else if (k == "--cache-type") {
      auto t = kv::ParseCacheType(value());
      if (!t.ok()) kUsage.Error(k + ": " + t.status().message());
      a.cache = *t;
    } else {
      kUsage.Unknown(k);
    }
  }
  return a;
}

// The BandwidthSpec file under the temp dir, written once (next to decode_bench's files, so
// `decode_bench --model` can be pointed at the same bytes).
std::string BandwidthModel() {
  const fs::path dir = fs::temp_directory_path() / "lockstep-bench";
  fs::create_directories(dir);
  const fs::path p = dir / "bandwidth-F16.gguf";
  if (fs::exists(p)) return p.string();
  const auto t0 = Clock::now();
  const std::string scratch = testing::ScratchPath(p);
  const Status s = model::WriteSyntheticModel(testing::BandwidthSpec(), scratch);
  if (!s.ok()) Die(s);
  fs::rename(scratch, p);
  std::fprintf(stderr, "wrote %s in %.1f s\n", p.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  return p.string();
}

// Sequence i's prompt: pseudo-random ids whose first token differs between sequences, so no
// sequence takes another's cached prefix and every row of a step is real work.
std::vector<int32_t> Prompt(int i, int n_vocab) {
  std::vector<int32_t> p;
  for (int j = 0; j < kPromptLen; ++j)
    p.push_back(static_cast<int32_t>((1 + i * 977 + j * 131 + j * j * 7) % n_vocab));
  return p;
}

// Weight bytes one decode step reads if every weight is streamed once per step, as decode_bench
// counts them: all tensors but the per-layer embedding table, of which single rows are gathered
// (token_embd is read whole: it is the tied LM head). An upper bound for MoE models.
double WeightBytesPerStep(const model::Model& m) {
  double b = 0;
  for (const auto& t : m.file().tensors())
    if (t.name != "per_layer_token_embd.weight") b += static_cast<double>(t.nbytes);
  return b;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Emitted-token counts of one engine run, kept by the engine's token sink.
struct Tally {
  engine::SeqId base = 0;      // id of sequence 0 (ids are consecutive)
  std::vector<int> emitted;    // per sequence
  int started = 0;             // sequences that emitted their first token (prefill done)
  std::vector<int32_t> first;  // tokens of sequence 0, for the exactness check
};

struct DecodeRun {
  double seconds = 0;          // the `tokens` timed steps
  std::vector<int32_t> first;  // tokens of sequence 0
};

// Submits n prompts and steps (untimed) until every sequence has its first token, then times
// `tokens` steps in which all n sequences decode one row each, then cancels them all.
DecodeRun TimeDecodeSteps(engine::Engine& e, int n, int tokens, int n_predict, int n_vocab) {
  Tally t;
  t.emitted.assign(static_cast<size_t>(n), 0);
  t.first.reserve(static_cast<size_t>(n_predict));
  std::vector<engine::SeqId> ids;
  for (int i = 0; i < n; ++i) {
    engine::Request r;
    r.prompt = Prompt(i, n_vocab);
    r.n_predict = n_predict;  // never reached: the run is cancelled first
    auto id = e.Submit(std::move(r));
    if (!id.ok()) Die(id.status());
    ids.push_back(*id);
  }
  t.base = ids[0];
  e.set_token_sink([&t](engine::SeqId id, int32_t token) {
    const size_t i = static_cast<size_t>(id - t.base);
    if (t.emitted[i]++ == 0) ++t.started;
    if (i == 0) t.first.push_back(token);
  });
  while (t.started < n)
    if (const Status s = e.Step(); !s.ok()) Die(s);
  const auto t0 = Clock::now();
  for (int k = 0; k < tokens; ++k) {
    if (const Status s = e.Step(); !s.ok()) Die(s);
    if (e.last_step_rows() != n)
      Die(Status::Errorf("a decode step of {} sequences ran {} rows", n, e.last_step_rows()));
  }
  DecodeRun run{std::chrono::duration<double>(Clock::now() - t0).count(), std::move(t.first)};
  for (engine::SeqId id : ids) e.Cancel(id);
  while (!e.Idle())
    if (const Status s = e.Step(); !s.ok()) Die(s);
  e.TakeFinished();
  e.set_token_sink(nullptr);
  return run;
}

struct Row {
  int seqs = 0;        // 0: plain engine::Generate of one sequence
  double step_ms = 0;  // median over reps
  double bw = 0;       // read bandwidth measured right before each rep, GB/s (median)
  double bw_frac = 0;  // weight bytes per step / step time / bw (median of per-rep ratios)
  bool exact = true;   // sequence 0 emitted what Generate emitted for the same prompt
  double tok_s() const { return std::max(seqs, 1) * 1000.0 / step_ms; }
};

// Generate is what `lockstep generate` runs: its generate_ms covers the n_predict - 1 decode
// steps after the prompt step, so tokens / generate_ms is the figure decode_bench reports.
Row MeasureGenerate(const model::Model& m, const Args& a, ReadBandwidth& bandwidth,
                    std::vector<int32_t>* ref) {
  engine::GenerateOptions opt;
  opt.n_predict = a.tokens + 1;
  opt.cache_type_k = opt.cache_type_v = a.cache;
  const std::vector<int32_t> prompt = Prompt(0, m.config().n_vocab);
  const double wbytes = WeightBytesPerStep(m);
  std::vector<double> ms, bw, frac;
  for (int rep = 0; rep < a.reps; ++rep) {
    bw.push_back(bandwidth.Measure(a.threads) / 1e9);
    auto r = engine::Generate(m, nullptr, prompt, opt);
    if (!r.ok()) Die(r.status());
    ms.push_back(r->generate_ms / static_cast<double>(r->tokens.size() - 1));
    frac.push_back(wbytes / (ms.back() * 1e6) / bw.back());
    *ref = std::move(r->tokens);
  }
  return {0, Median(ms), Median(bw), Median(frac), true};
}

Row MeasureEngine(const model::Model& m, int n, const Args& a, ReadBandwidth& bandwidth,
                  const std::vector<int32_t>& ref) {
  const int n_predict = a.tokens + n + 2;  // prefill takes at most n steps
  engine::Options opt;                     // the engine's defaults otherwise, as Generate uses them
  opt.n_seq_max = n;
  opt.n_ctx = kPromptLen + n_predict;
  opt.cache_type_k = opt.cache_type_v = a.cache;
  auto e = engine::Engine::Create(m, nullptr, opt);
  if (!e.ok()) Die(e.status());
  const double wbytes = WeightBytesPerStep(m);
  Row row{n};
  std::vector<double> ms, bw, frac;
  for (int rep = 0; rep < a.reps; ++rep) {
    bw.push_back(bandwidth.Measure(a.threads) / 1e9);
    const DecodeRun run = TimeDecodeSteps(**e, n, a.tokens, n_predict, m.config().n_vocab);
    ms.push_back(run.seconds * 1000.0 / a.tokens);
    frac.push_back(wbytes / (ms.back() * 1e6) / bw.back());
    const size_t common = std::min(run.first.size(), ref.size());
    row.exact = row.exact && std::equal(ref.begin(), ref.begin() + common, run.first.begin());
  }
  row.step_ms = Median(ms);
  row.bw = Median(bw);
  row.bw_frac = Median(frac);
  return row;
}

struct Report {
  std::string model;
  double weight_bytes = 0;
  Row generate;
  std::vector<Row> engine;
  size_t kv_ours = 0, kv_llama = 0;
  // Aggregate tok/s of one sequence through the engine (else through Generate): the ratios' base.
  double base_tok_s() const {
    for (const Row& r : engine)
      if (r.seqs == 1) return r.tok_s();
    return generate.tok_s();
  }
};

constexpr int kKvCtx = 32768;

void PrintRow(const char* mode, const Row& r, const Report& rep) {
  const int n = std::max(r.seqs, 1);
  std::printf("%-9s %4d %8.2f %9.1f %9.1f %6.2f %7.1f %7.1f %7.2f %5s\n", mode, n, r.step_ms,
              r.tok_s(), r.tok_s() / n, r.tok_s() / rep.base_tok_s(),
              rep.weight_bytes / (r.step_ms * 1e6), r.bw, r.bw_frac, r.exact ? "yes" : "NO");
}

void PrintTable(const Report& rep, const Args& a) {
  std::printf(
      "model %s: %.1f MiB of weights read per step; %d threads; per sequence a %d-token prompt "
      "(not timed), then %d timed decode steps; greedy; medians of %d runs, each right after a "
      "read-bandwidth measurement (bw)\n",
      rep.model.c_str(), rep.weight_bytes / 1048576.0, a.threads, kPromptLen, a.tokens, a.reps);
  std::printf("%-9s %4s %8s %9s %9s %6s %7s %7s %7s %5s\n", "mode", "seqs", "ms/step", "tok/s",
              "tok/s/seq", "vs_1", "wGB/s", "bw GB/s", "bw_frac", "exact");
  PrintRow("generate", rep.generate, rep);
  for (const Row& r : rep.engine) PrintRow("engine", r, rep);
  std::printf(
      "tok/s: all sequences together; vs_1: tok/s / one sequence through the engine; wGB/s: "
      "weight bytes per step / step time; bw_frac: wGB/s / bw; exact: sequence 0 emitted "
      "Generate's tokens\n");
  std::printf(
      "KV per sequence, 26B-A4B shape, %d context, f16: lockstep %.1f MiB, llama.cpp "
      "%.1f MiB (%.3fx)\n",
      kKvCtx, rep.kv_ours / 1048576.0, rep.kv_llama / 1048576.0,
      static_cast<double>(rep.kv_ours) / static_cast<double>(rep.kv_llama));
  std::printf(
      "same model without the engine: decode_bench --model %s --skip-large --threads %d "
      "--type F16 --pp 0 --decode %d\n",
      rep.model.c_str(), a.threads, a.tokens);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void PrintJsonRow(const char* mode, const Row& r, const Report& rep, bool last) {
  const int n = std::max(r.seqs, 1);
  std::printf(
      "    {\"mode\": \"%s\", \"seqs\": %d, \"ms_per_step\": %.4f, \"tok_s\": %.3f, "
      "\"tok_s_per_seq\": %.3f, \"vs_1\": %.4f, \"weight_gb_s\": %.3f, \"bw_gb_s\": %.3f, "
      "\"bw_frac\": %.4f, \"exact\": %s}%s\n",
      mode, n, r.step_ms, r.tok_s(), r.tok_s() / n, r.tok_s() / rep.base_tok_s(),
      rep.weight_bytes / (r.step_ms * 1e6), r.bw, r.bw_frac, r.exact ? "true" : "false",
      last ? "" : ",");
}

void PrintJson(const Report& rep, const Args& a) {
  std::printf("{\n  \"model\": %s,\n  \"weight_bytes_per_step\": %.0f,\n",
              JsonString(rep.model).c_str(), rep.weight_bytes);
  std::printf(
      "  \"threads\": %d,\n  \"prompt_tokens\": %d,\n  \"decode_steps\": %d,\n"
      "  \"reps\": %d,\n  \"rows\": [\n",
      a.threads, kPromptLen, a.tokens, a.reps);
  PrintJsonRow("generate", rep.generate, rep, rep.engine.empty());
  for (size_t i = 0; i < rep.engine.size(); ++i)
    PrintJsonRow("engine", rep.engine[i], rep, i + 1 == rep.engine.size());
  std::printf(
      "  ],\n  \"kv_per_sequence\": {\"shape\": \"26B-A4B\", \"n_ctx\": %d, \"type\": "
      "\"f16\", \"lockstep_bytes\": %zu, \"llamacpp_bytes\": %zu}\n}\n",
      kKvCtx, rep.kv_ours, rep.kv_llama);
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  const Args a = ParseArgs(argc, argv);
  Report rep;
  rep.model = a.model.empty() ? BandwidthModel() : a.model;
  auto backend = backend::Create(a.device, a.threads);
  if (!backend) Die(Status::Errorf("--device {}: not available", a.device));
  backend::Backend& be = *backend;
  auto m = model::Model::Load(rep.model, be);
  if (!m.ok()) Die(m.status());
  const model::Model& model = **m;
  rep.weight_bytes = WeightBytesPerStep(model);
  const kv::CacheConfig kc = testing::Gemma26bA4b(kKvCtx, DType::F16);
  rep.kv_ours = kv::KvCache::BytesPerSequence(kc, kKvCtx);
  rep.kv_llama = kv::LlamaCppBytesPerSequence(kc, kKvCtx, 1024);
  ReadBandwidth bandwidth;
  // Untimed warm-up: pages the weights in and starts the worker threads, so the first timed
  // row is not penalised against the ones after it.
  std::vector<int32_t> ref;
  engine::GenerateOptions warm;
  warm.n_predict = 2;
  if (auto r = engine::Generate(model, nullptr, Prompt(0, model.config().n_vocab), warm); !r.ok())
    Die(r.status());
  bandwidth.Measure(a.threads);  // one untimed pass too: the first one can read far too low
  rep.generate = MeasureGenerate(model, a, bandwidth, &ref);
  for (int n : a.seqs) {
    rep.engine.push_back(MeasureEngine(model, n, a, bandwidth, ref));
    if (!a.json) std::fprintf(stderr, "seqs %d done\n", n);
  }
  if (a.json)
    PrintJson(rep, a);
  else
    PrintTable(rep, a);
  for (const Row& r : rep.engine)
    if (!r.exact) return 3;
  return 0;
}

// Decode tokens/s and achieved bandwidth (weight + KV bytes read per token / time) next to the
// machine's read bandwidth measured right before each run, for F16 / Q8_0 / Q4_K_M of the default
// model and of a larger-than-cache synthetic model, at 1 and 2 threads; plus 512-token prompt
// processing. Options: kUsage below, or `decode_bench --help`.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_common.h"
#include "model/model.h"
#include "quant/model_quantize.h"
#include "read_bandwidth.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using bench::Clock;
using bench::KvBytesPerToken;
using bench::Median;
using bench::Seconds;
using bench::WeightBytesPerToken;

constexpr bench::Usage kUsage{
    "decode_bench",
    "usage: decode_bench [options]\n"
    "Decode tokens/s and bandwidth of F16, Q8_0 and Q4_K_M models (quantized copies are\n"
    "written once under the temp directory's lockstep-bench/, as is the large model).\n"
    "  --decode N       timed decode steps per run (default 32)\n"
    "  --pp N           prompt tokens of the prefill row, 0: none (default 512)\n"
    "  --skip-large     leave out the large synthetic model (default: both models)\n"
    "  --only-large     leave out the default model (default: both models)\n"
    "  --threads 1|2    only this thread count (default: 1 and 2)\n"
    "  --type T         only this type: F16, Q8_0 or Q4_K_M (default: all three)\n"
    "  --model PATH     the default model, F16 (default models/lockstep-code-target.gguf,\n"
    "                   relative to the working directory)\n"
    "  -h, --help       print this and exit\n"};

struct Options {
  int n_decode = 32, n_pp = 512;
  bool large = true, only_large = false;
  int only_threads = 0;  // 0: both 1 and 2
  std::string only_type;
  std::string model = "models/lockstep-code-target.gguf";
};

Options Parse(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (a == "--decode")
      o.n_decode = std::max(1, std::atoi(value()));
    else if (a == "--pp")
      o.n_pp = std::max(0, std::atoi(value()));
    else if (a == "--skip-large")
      o.large = false;
    else if (a == "--only-large")
      o.only_large = true;
    else if (a == "--threads")
      o.only_threads = std::atoi(value());
    else if (a == "--type")
      o.only_type = value();
    else if (a == "--model")
      o.model = value();
    else
      kUsage.Unknown(a);
  }
  return o;
}

struct Row {
  std::string model, type;
  int threads = 0;
  double mib = 0, tok_s = 0, gb_s = 0, bw = 0, bw_frac = 0, pp_tok_s = 0;
};

constexpr int kReps = 3;  // decode runs per row, each right after its bandwidth measurement

// Decode speed of one model file: kReps runs of n_decode tokens, each preceded by a bandwidth
// measurement; the row reports medians, and bw_frac is the median of per-run ratios.
Row Measure(const std::string& label, const std::string& type, const std::string& path, int threads,
            int n_decode, int n_pp, ReadBandwidth& bandwidth) {
  backend::CpuBackend be(threads);
  auto m = model::Model::Load(path, be);
  if (!m.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", m.status().message().c_str());
    std::exit(1);
  }
  const model::Model& model = **m;
  const int V = model.config().n_vocab;
  Row r{label, type, threads, WeightBytesPerToken(model) / (1 << 20)};
  constexpr int kPrefix = 32;
  auto kv = model.NewKv(1, std::max(n_pp, kPrefix + kReps * n_decode) + 1, std::max(n_pp, kPrefix))
                .value();
  // One workspace for every forward, as the engine keeps: a decode step allocates nothing.
  model::Workspace ws(be, model.config(), std::max(n_pp, kPrefix), 1);
  model::StepOutputs out;
  model::Batch prefix;
  for (int i = 0; i < kPrefix; ++i) prefix.Add((i * 131 + 7) % V, i, 0, i == kPrefix - 1);
  if (!model.Forward(prefix, *kv, ws, &out).ok()) std::exit(1);
  model::Batch b;
  std::vector<double> tok_s, gb_s, bw, frac;
  int pos = kPrefix;
  for (int rep = 0; rep < kReps; ++rep) {
    bw.push_back(bandwidth.Measure(threads) / 1e9);
    double kv_bytes = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < n_decode; ++i, ++pos) {
      b.Clear();
      b.Add((pos * 131 + 7) % V, pos, 0, true);
      if (!model.Forward(b, *kv, ws, &out).ok()) std::exit(1);
      kv_bytes += KvBytesPerToken(model.config(), pos);
    }
    const double sec = Seconds(t0);
    tok_s.push_back(n_decode / sec);
    gb_s.push_back((r.mib * (1 << 20) * n_decode + kv_bytes) / sec / 1e9);
    frac.push_back(gb_s.back() / bw.back());
  }
  r.tok_s = Median(tok_s);
  r.gb_s = Median(gb_s);
  r.bw = Median(bw);
  r.bw_frac = Median(frac);
  if (n_pp > 0) {
    model::Batch pp;
    for (int i = 0; i < n_pp; ++i) pp.Add((i * 131 + 7) % V, i, 0, i == n_pp - 1);
    const auto t1 = Clock::now();
    if (!model.Forward(pp, *kv, ws, &out).ok()) std::exit(1);
    r.pp_tok_s = n_pp / Seconds(t1);
  }
  return r;
}

// Writes `in` quantized to each mix next to `dir`, once (reused when already there).
std::vector<std::pair<std::string, std::string>> Variants(const std::string& f16,
                                                          const fs::path& dir,
                                                          const std::string& stem) {
  std::vector<std::pair<std::string, std::string>> v{{"F16", f16}};
  for (quant::Mix mix : {quant::Mix::Q8_0, quant::Mix::Q4_K_M}) {
    const fs::path p = dir / (stem + "-" + std::string(quant::MixName(mix)) + ".gguf");
    if (!fs::exists(p)) {
      const auto t0 = Clock::now();
      const Status s = quant::QuantizeModel(f16, p.string(), mix, {.threads = 2});
      if (!s.ok()) {
        std::fprintf(stderr, "decode_bench: %s\n", s.message().c_str());
        std::exit(1);
      }
      std::fprintf(stderr, "quantized %s in %.1f s\n", p.c_str(), Seconds(t0));
    }
    v.emplace_back(std::string(quant::MixName(mix)), p.string());
  }
  return v;
}

std::string LargeModel(const fs::path& dir) {
  const fs::path p = dir / "large-F16.gguf";
  if (fs::exists(p)) return p.string();
  model::SyntheticSpec s;  // ~230M parameters: far larger than any cache
  s.n_vocab = 32000;
  s.n_embd = 1024;
  s.n_layer = 12;
  s.full_every = 6;
  s.n_head = 8;
  s.n_head_kv_swa = 4;
  s.n_head_kv_full = 2;
  s.head_dim_swa = 128;
  s.head_dim_full = 256;
  s.n_swa = 512;
  s.n_ff = 4096;
  s.weight_type = DType::F16;
  const auto t0 = Clock::now();
  const Status st = model::WriteSyntheticModel(s, p.string() + ".w");
  if (!st.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", st.message().c_str());
    std::exit(1);
  }
  fs::rename(p.string() + ".w", p);
  std::fprintf(stderr, "wrote %s in %.1f s\n", p.c_str(), Seconds(t0));
  return p.string();
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  const Options o = Parse(argc, argv);
  const fs::path dir = fs::temp_directory_path() / "lockstep-bench";
  fs::create_directories(dir);
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> models;
  if (!o.only_large) models.emplace_back("default", Variants(o.model, dir, "default"));
  if (o.large) models.emplace_back("large", Variants(LargeModel(dir), dir, "large"));

  ReadBandwidth bandwidth;
  std::printf(
      "decode: %d runs of %d tokens after a 32-token prefix, medians; each run right "
      "after a read-bandwidth measurement (bw GB/s); pp: one %d-token batch\n",
      kReps, o.n_decode, o.n_pp);
  std::printf("%-8s %-7s %3s %9s %9s %8s %8s %8s %8s %9s\n", "model", "type", "thr", "wMiB/tok",
              "tok/s", "GB/s", "bw GB/s", "bw_frac", "vs_F16", "pp tok/s");
  for (const auto& [label, variants] : models) {
    for (int threads : {1, 2}) {
      if (o.only_threads != 0 && threads != o.only_threads) continue;
      double f16_tok_s = 0;
      for (const auto& [type, path] : variants) {
        if (!o.only_type.empty() && type != o.only_type) continue;
        const Row r = Measure(label, type, path, threads, o.n_decode, o.n_pp, bandwidth);
        if (type == "F16") f16_tok_s = r.tok_s;
        char vs[16] = "-";
        if (f16_tok_s > 0) std::snprintf(vs, sizeof(vs), "%.2f", r.tok_s / f16_tok_s);
        std::printf("%-8s %-7s %3d %9.2f %9.2f %8.2f %8.2f %8.2f %8s %9.1f\n", r.model.c_str(),
                    r.type.c_str(), r.threads, r.mib, r.tok_s, r.gb_s, r.bw, r.bw_frac, vs,
                    r.pp_tok_s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

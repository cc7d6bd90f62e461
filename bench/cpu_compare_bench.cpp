// CPU prefill and decode of any GGUF with the quantized tile kernels, and (--baseline) with
// today's row-by-row quantized path, measured alternately in one run: pp (one batch of N
// tokens) and tg (N single-token steps after a 16-token prefix) at each thread count, plus the
// weight bytes a decoded token reads against the read bandwidth measured right before each
// decode run; --moe-pairs adds the MoE experts one (row, expert) pair at a time with the dense
// matmuls on tiles (the path before grouped experts), --unpacked-experts leaves MoE experts
// mmapped. Every path gives the same bits; only the time differs. Figures are the best of the
// alternating runs (on a shared machine contention only ever slows a run), medians alongside.
// --write-preset writes a synthetic model, F16 or directly in a `lockstep quantize` mix such as
// Q4_K_M (the tensor types quantize would choose, without a 62 GB float file for the 31B).
// Options: kUsage below, or `cpu_compare_bench --help`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_common.h"
#include "model/model.h"
#include "read_bandwidth.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

using bench::Clock;
using bench::Seconds;

constexpr bench::Usage kUsage{
    "cpu_compare_bench",
    "usage: cpu_compare_bench --model PATH [options]\n"
    "       cpu_compare_bench --write-preset NAME PATH [MIX]\n"
    "CPU prefill and decode of a GGUF, tile kernels against other paths, run alternately.\n"
    "  --model PATH         the model to run (required)\n"
    "  --baseline           also time the row-by-row quantized path (default: off)\n"
    "  --moe-pairs          also time MoE experts one (row, expert) pair at a time (default: off)\n"
    "  --unpacked-experts   read MoE experts from the mmapped file (default: packed copies)\n"
    "  --threads N,N,...    thread counts, one model load each (default 1,2)\n"
    "  --pp N,N,...         prefill batch lengths (default 128,512)\n"
    "  --tg N               decode steps after a 16-token prefix (default 64)\n"
    "  --reps N             alternating runs of every path; the best is shown (default 3)\n"
    "  --write-preset NAME PATH [MIX]\n"
    "                       write the synthetic model NAME (d17b, moe4b, e4b, 26b-a4b, 31b) to\n"
    "                       PATH and exit; MIX: a `lockstep quantize` mix (default: F16)\n"
    "  -h, --help           print this and exit\n"};

struct Options {
  std::string model;
  bool baseline = false;
  bool pack_experts = true;  // --unpacked-experts: MoE experts read from the mmapped file
  bool moe_pairs = false;    // --moe-pairs: also time MoE one (row, expert) pair at a time
  std::vector<int> threads = {1, 2}, pp = {128, 512};
  int tg = 64, reps = 3;
};

std::vector<int> IntList(const std::string& s) {
  std::vector<int> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    v.push_back(std::max(1, std::atoi(item.c_str())));
  return v;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cpu_compare_bench: %s\n", what.c_str());
  std::exit(1);
}

double Best(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

int Token(int i, int n_vocab) {
  return (i * 131 + 7) % n_vocab;
}

// Tokens/s of one n-token prefill into a fresh cache (logits for the last row only, as a prompt).
double Prefill(const model::Model& m, backend::CpuBackend& be, int n) {
  auto kv = m.NewKv(1, n + 1, n);
  if (!kv.ok()) Fail(kv.status().message());
  model::Workspace ws(be, m.config(), n, 1);
  model::Batch b;
  for (int i = 0; i < n; ++i) b.Add(Token(i, m.config().n_vocab), i, 0, i == n - 1);
  model::StepOutputs out;
  const auto t0 = Clock::now();
  if (!m.Forward(b, **kv, ws, &out).ok()) Fail("prefill failed");
  return n / Seconds(t0);
}

struct DecodeRun {
  double tok_s = 0, bytes_per_tok = 0;
};

// n single-token steps after a 16-token prefix; bytes: weights plus the KV read per step.
DecodeRun Decode(const model::Model& m, backend::CpuBackend& be, int n) {
  constexpr int kPrefix = 16;
  auto kv = m.NewKv(1, kPrefix + n + 1, kPrefix);
  if (!kv.ok()) Fail(kv.status().message());
  model::Workspace ws(be, m.config(), kPrefix, 1);
  model::StepOutputs out;
  model::Batch b;
  for (int i = 0; i < kPrefix; ++i) b.Add(Token(i, m.config().n_vocab), i, 0, i == kPrefix - 1);
  if (!m.Forward(b, **kv, ws, &out).ok()) Fail("prefix failed");
  double kv_bytes = 0;
  const auto t0 = Clock::now();
  for (int pos = kPrefix; pos < kPrefix + n; ++pos) {
    b.Clear();
    b.Add(Token(pos, m.config().n_vocab), pos, 0, true);
    if (!m.Forward(b, **kv, ws, &out).ok()) Fail("decode failed");
    kv_bytes += bench::KvBytesPerToken(m.config(), pos);
  }
  const double sec = Seconds(t0);
  return {n / sec, bench::WeightBytesPerToken(m) + kv_bytes / n};
}

// Per path: pp tok/s per length, decode tok/s, measured bandwidth, fraction of it reached.
struct Samples {
  std::vector<std::vector<double>> pp;
  std::vector<double> tg, bw, frac;
  double bytes_per_tok = 0;
};

void RunThreads(const Options& o, int threads, ReadBandwidth& bandwidth) {
  backend::CpuBackend be(threads);
  be.set_pack_experts(o.pack_experts);
  const auto t0 = Clock::now();
  auto loaded = model::Model::Load(o.model, be);
  if (!loaded.ok()) Fail(loaded.status().message());
  std::printf("%3d load %.2f s, RSS %.2f GiB\n", threads, Seconds(t0), bench::ResidentGiB());
  const model::Model& m = **loaded;
  // The paths measured, alternately: the default, then the row-by-row baseline and the MoE
  // experts one (row, expert) pair at a time (the dense matmuls on tiles) where asked.
  struct Path {
    const char* name;
    bool tiles, moe_grouped;
  };
  std::vector<Path> paths = {{"tiles", true, true}};
  if (o.baseline) paths.push_back({"baseline", false, false});
  if (o.moe_pairs) paths.push_back({"moe-pairs", true, false});
  const int n_paths = static_cast<int>(paths.size());
  std::vector<Samples> s(static_cast<size_t>(n_paths));
  for (auto& p : s) p.pp.resize(o.pp.size());
  Prefill(m, be, 16);  // warm-up: page in the weights, grow the buffers
  for (int rep = 0; rep < o.reps; ++rep)
    for (int k = 0; k < n_paths; ++k) {
      const int path = (k + rep) % n_paths;  // rotate which path goes first
      be.set_quant_tiles(paths[path].tiles);
      be.set_moe_grouped(paths[path].moe_grouped);
      for (size_t i = 0; i < o.pp.size(); ++i) s[path].pp[i].push_back(Prefill(m, be, o.pp[i]));
      const double bw = bandwidth.Measure(threads);
      const DecodeRun d = Decode(m, be, o.tg);
      s[path].tg.push_back(d.tok_s);
      s[path].bw.push_back(bw / 1e9);
      s[path].frac.push_back(d.tok_s * d.bytes_per_tok / bw);
      s[path].bytes_per_tok = d.bytes_per_tok;
    }
  for (int path = 0; path < n_paths; ++path) {
    std::printf("%3d %-9s", threads, paths[path].name);
    for (const auto& v : s[path].pp) std::printf(" %9.2f", Best(v));
    std::printf(" %9.2f %9.3f %8.2f %8.2f   median pp", Best(s[path].tg),
                s[path].bytes_per_tok / 1e9, Best(s[path].bw), Best(s[path].frac));
    for (const auto& v : s[path].pp) std::printf(" %.2f", bench::Median(v));
    std::printf(" tg %.2f\n", bench::Median(s[path].tg));
  }
  for (int path = 1; path < n_paths; ++path) {  // the default over each other path
    std::printf("%3d %-9s", threads, path == 1 ? "ratio" : "ratio2");
    for (size_t i = 0; i < o.pp.size(); ++i)
      std::printf(" %8.2fx", Best(s[0].pp[i]) / Best(s[path].pp[i]));
    std::printf(" %8.2fx\n", Best(s[0].tg) / Best(s[path].tg));
  }
  std::fflush(stdout);
}

int WritePreset(const std::string& name, const std::string& path, const std::string& mix) {
  auto spec = model::SyntheticPreset(name);
  if (!spec) Fail("unknown preset " + name + " (d17b, moe4b, e4b, 26b-a4b, 31b)");
  if (!mix.empty()) {
    spec->mix = quant::MixFromName(mix);
    if (!spec->mix) Fail("unknown mix " + mix + " (" + quant::ValidMixNames() + ")");
  }
  spec->random_blocks = true;  // random well-formed blocks: speed benches read bytes, not values
  const auto t0 = Clock::now();
  const Status st = model::WriteSyntheticModel(*spec, path);
  if (!st.ok()) Fail(st.message());
  std::fprintf(stderr, "wrote %s in %.1f s\n", path.c_str(), Seconds(t0));
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  kUsage.HelpIfAsked(argc, argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-preset") {
      if (i + 2 >= argc) kUsage.Error("option --write-preset needs NAME and PATH");
      return WritePreset(argv[i + 1], argv[i + 2], i + 3 < argc ? argv[i + 3] : "");
    }
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (a == "--model")
      o.model = value();
    else if (a == "--baseline")
      o.baseline = true;
    else if (a == "--unpacked-experts")
      o.pack_experts = false;
    else if (a == "--moe-pairs")
      o.moe_pairs = true;
    else if (a == "--threads")
      o.threads = IntList(value());
    else if (a == "--pp")
      o.pp = IntList(value());
    else if (a == "--tg")
      o.tg = std::max(1, std::atoi(value()));
    else if (a == "--reps")
      o.reps = std::max(1, std::atoi(value()));
    else
      kUsage.Unknown(a);
  }
  if (o.model.empty()) kUsage.Error("--model is required");
  ReadBandwidth bandwidth;
  std::printf(
      "%s: best of %d alternating runs; pp: one batch, tg: %d steps after 16 tokens;\n"
      "GB/tok: weight + KV bytes per decoded token; bw: best read bandwidth measured right "
      "before a tg run; frac: best of tg * GB/tok / bw per run\n",
      o.model.c_str(), o.reps, o.tg);
  std::printf("%3s %-9s", "thr", "path");
  for (int n : o.pp) std::printf(" %7s%-2d", "pp", n);
  std::printf(" %7s%-2d %9s %8s %8s\n", "tg", o.tg, "GB/tok", "bw GB/s", "frac");
  for (int threads : o.threads) RunThreads(o, threads, bandwidth);
  return 0;
}

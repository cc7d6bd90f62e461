// Matrix-vector throughput of the CPU backend's MatMul (one activation row, the decode case) per
// weight type, as GB/s of weight bytes next to the machine's read bandwidth measured in the same
// run; a weight matrix far larger than the caches, so every call streams it from memory.
// With --n, the weight is [k, n] and enough copies of it to fill M MiB are used in turn, so
// small matrices (a model's attention projections) are also read from memory, not cache.
// With --rows R, R activation rows share each call (decode of R sequences together).
// Types with packed kernels at this CPU's level (quant/packed.h) are measured both ways, the
// packed copy and the plain rows, in alternating rounds, with the ratio.
// Options: kUsage below, or `matvec_bench --help`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_common.h"
#include "core/dtype.h"
#include "quant/quant.h"
#include "read_bandwidth.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

constexpr bench::Usage kUsage{
    "matvec_bench",
    "usage: matvec_bench [options]\n"
    "MatMul throughput per weight type as GB/s of weight bytes, next to the read bandwidth.\n"
    "  --threads N        CPU threads (default 2)\n"
    "  --types T,T,...    weight types (default F16,Q8_0,Q4_K,Q6_K,Q4_0,Q5_0,Q2_K,Q3_K,BF16)\n"
    "  --mib M            MiB of weights streamed per pass (default 256)\n"
    "  --reps R           passes; the best is shown (default 20)\n"
    "  --k K              weight columns, at least 256 (default 4096)\n"
    "  --n N              weight rows; copies fill M MiB (default: one matrix of M MiB)\n"
    "  --rows R           activation rows per call (default 1)\n"
    "  -h, --help         print this and exit\n"};

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Matrix {
  std::vector<uint8_t> bytes;
  backend::Weight w;
};

// A [k, n] weight of type t holding random values, quantized row by row.
Matrix RandomMatrix(DType t, int64_t k, int64_t n, uint32_t seed) {
  Matrix m;
  const size_t row_bytes = RowBytes(t, k);
  m.bytes.resize(row_bytes * static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (auto& v : row) v = nd(rng);
    quant::QuantizeRow(t, row.data(), m.bytes.data() + r * row_bytes, k);
  }
  m.w.name = "bench";
  m.w.type = t;
  m.w.ne = {k, n};
  m.w.data = m.bytes.data();
  m.w.row_bytes = row_bytes;
  return m;
}

std::vector<DType> ParseTypes(const std::string& list) {
  std::vector<DType> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const auto t = DTypeFromName(name);
    if (!t) kUsage.Error("--types: unknown type '" + name + "'");
    out.push_back(*t);
  }
  return out;
}

struct Options {
  int threads = 2, reps = 20;
  int64_t mib = 256, k = 4096, n_fixed = 0, rows = 1;  // n_fixed 0: one matrix of mib MiB
  std::vector<DType> types = ParseTypes("F16,Q8_0,Q4_K,Q6_K,Q4_0,Q5_0,Q2_K,Q3_K,BF16");
};

Options Parse(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (a == "--threads")
      o.threads = std::max(1, std::atoi(value()));
    else if (a == "--types")
      o.types = ParseTypes(value());
    else if (a == "--mib")
      o.mib = std::max<int64_t>(1, std::atoll(value()));
    else if (a == "--k")
      o.k = std::max<int64_t>(256, std::atoll(value()));
    else if (a == "--n")
      o.n_fixed = std::max<int64_t>(1, std::atoll(value()));
    else if (a == "--rows")
      o.rows = std::max<int64_t>(1, std::atoll(value()));
    else if (a == "--reps")
      o.reps = std::max(1, std::atoi(value()));
    else
      kUsage.Unknown(a);
  }
  return o;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  const Options o = Parse(argc, argv);
  const int threads = o.threads, reps = o.reps;
  const int64_t mib = o.mib, k = o.k, n_fixed = o.n_fixed, rows = o.rows;
  const double bw = ReadBandwidth().Measure(threads) / 1e9;
  std::printf("read bandwidth (%d threads): %.2f GB/s; kernels: %s\n", threads, bw,
              std::string(quant::IsaName(quant::CpuIsa())).c_str());
  std::printf("%-7s %-7s %8s %8s %10s %8s %8s\n", "type", "layout", "k", "n", "us/call", "GB/s",
              "bw_frac");
  backend::CpuBackend be(threads);
  for (DType t : o.types) {
    if (!quant::CanQuantize(t)) {
      std::printf("%-7s (skipped: lockstep has no quantizer to make a random %s matrix)\n",
                  std::string(Name(t)).c_str(), std::string(Name(t)).c_str());
      continue;
    }
    const int64_t total_rows = (mib << 20) / static_cast<int64_t>(RowBytes(t, k));
    const int64_t n = n_fixed > 0 ? n_fixed : std::max<int64_t>(16, total_rows);
    const int64_t copies = std::max<int64_t>(1, total_rows / n);
    std::vector<Matrix> ms;
    for (int64_t c = 0; c < copies; ++c) ms.push_back(RandomMatrix(t, k, n, 7 + c));
    auto x = be.NewTensor(rows, k);
    auto y = be.NewTensor(rows, n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < k; ++i) x.row(r)[i] = std::sin(0.1f * static_cast<float>(i + r));
    // The weights as the model binds them (packed where the CPU has packed kernels) and as
    // plain row views (the mmapped layout), in alternating rounds.
    std::vector<backend::Weight> plain, packed;
    for (const auto& m : ms) {
      plain.push_back(m.w);
      packed.push_back(be.PrepareWeight(m.w));
    }
    const bool has_packed = packed[0].packed != nullptr;
    auto pass = [&](const std::vector<backend::Weight>& ws) {
      const auto t0 = Clock::now();
      for (const auto& w : ws) be.MatMul(w, x, &y);
      return Seconds(t0) / static_cast<double>(copies);
    };
    pass(plain);  // warm-up
    if (has_packed) pass(packed);
    double best = 1e30, best_packed = 1e30;
    for (int r = 0; r < reps; ++r) {
      best = std::min(best, pass(plain));
      if (has_packed) best_packed = std::min(best_packed, pass(packed));
    }
    const double bytes = static_cast<double>(ms[0].bytes.size());
    auto report = [&](const char* layout, double sec) {
      std::printf("%-7s %-7s %8lld %8lld %10.1f %8.2f %8.2f\n", std::string(Name(t)).c_str(),
                  layout, static_cast<long long>(k), static_cast<long long>(n), sec * 1e6,
                  bytes / sec / 1e9, bytes / sec / 1e9 / bw);
    };
    report("rows", best);
    if (has_packed) {
      report("packed", best_packed);
      std::printf("%-7s packed / rows speed: %.2fx\n", std::string(Name(t)).c_str(),
                  best / best_packed);
    }
    std::fflush(stdout);
  }
  return 0;
}

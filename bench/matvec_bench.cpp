// Matrix-vector throughput of the CPU backend's MatMul (one activation row, the decode case) per
// weight type, as GB/s of weight bytes next to the machine's read bandwidth measured in the same
// run; a weight matrix far larger than the caches, so every call streams it from memory.
// With --n, the weight is [k, n] and enough copies of it to fill M MiB are used in turn, so
// small matrices (a model's attention projections) are also read from memory, not cache.
// With --rows R, R activation rows share each call (decode of R sequences together).
// Types with packed kernels at this CPU's level (quant/packed.h) are measured both ways, the
// packed copy and the plain rows, in alternating rounds, with the ratio.
// Usage: matvec_bench [--threads N] [--types F16,Q8_0,...] [--mib M] [--reps R] [--k K] [--n N]
//                     [--rows R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "quant/quant.h"
#include "read_bandwidth.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

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
    if (!t) {
      std::fprintf(stderr, "matvec_bench: unknown type '%s'\n", name.c_str());
      std::exit(2);
    }
    out.push_back(*t);
  }
  return out;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  int threads = 2, reps = 20;
  int64_t mib = 256, k = 4096, n_fixed = 0, rows = 1;
  std::string types = "F16,Q8_0,Q4_K,Q6_K,Q4_0,Q5_0,Q2_K,Q3_K,BF16";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--types" && i + 1 < argc)
      types = argv[++i];
    else if (a == "--mib" && i + 1 < argc)
      mib = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--k" && i + 1 < argc)
      k = std::max<int64_t>(256, std::atoll(argv[++i]));
    else if (a == "--n" && i + 1 < argc)
      n_fixed = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--rows" && i + 1 < argc)
      rows = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(
          stderr,
          "usage: matvec_bench [--threads N] [--types T1,T2,...] [--mib M] [--reps R] [--k K] "
          "[--n N] [--rows R]\n"
          "  streams M MiB of [K, N] weights (default 256 MiB, K 4096, one matrix) "
          "through MatMul with R activation rows (default 1)\n");
      return 2;
    }
  }
  const double bw = ReadBandwidth().Measure(threads) / 1e9;
  std::printf("read bandwidth (%d threads): %.2f GB/s; kernels: %s\n", threads, bw,
              std::string(quant::IsaName(quant::CpuIsa())).c_str());
  std::printf("%-7s %-7s %8s %8s %10s %8s %8s\n", "type", "layout", "k", "n", "us/call", "GB/s",
              "bw_frac");
  backend::CpuBackend be(threads);
  for (DType t : ParseTypes(types)) {
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

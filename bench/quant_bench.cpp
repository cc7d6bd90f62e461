// Dot-kernel throughput per weight type (GB/s of weight bytes, 1-row and 8-row batches) next to
// a measured memory read bandwidth (large buffer sum); `membw_frac` is their ratio.
// Options (Google Benchmark's flags): kUsage below, or `quant_bench --help`.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/dtype.h"
#include "quant/quant.h"
#include "read_bandwidth.h"

namespace lockstep::quant {
namespace {

constexpr bench::Usage kUsage{
    "quant_bench",
    "usage: quant_bench [--benchmark_FLAG=VALUE ...]\n"
    "Dot-kernel GB/s per weight type at 1 and 8 activation rows, next to the read bandwidth.\n"
    "  --benchmark_filter=REGEX          only the benchmarks whose name (Dot/TYPE/batch1 or\n"
    "                                    Dot/TYPE/batch8) matches (default: all)\n"
    "  --benchmark_repetitions=N         runs of each benchmark (default 1)\n"
    "  --benchmark_format=console|json|csv\n"
    "                                    stdout format (default console)\n"
    "  --benchmark_out=FILE              also write the results to FILE (default: none)\n"
    "  --benchmark_list_tests=true       list the benchmark names, run none (default false)\n"
    "  --benchmark_min_time has no effect here: each benchmark runs at least 0.3 s.\n"
    "  The other --benchmark_* flags are Google Benchmark's, listed after this text by --help.\n"
    "  -h, --help                        print this and Google Benchmark's flags, and exit\n"};

constexpr int64_t kK = 4096;
constexpr size_t kWeightBytesTarget = 64u << 20;  // larger than the caches: a streaming read

void DotBench(benchmark::State& state, DType t, int batch, double membw) {
  const size_t row_bytes = RowBytes(t, kK);
  const int64_t rows = static_cast<int64_t>(kWeightBytesTarget / row_bytes);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> tmp(kK);
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(rows));
  for (int64_t j = 0; j < rows; ++j) {
    for (auto& v : tmp) v = g(rng);
    QuantizeRow(t, tmp.data(), w.data() + j * row_bytes, kK);
  }
  std::vector<PreparedRow> px(static_cast<size_t>(batch));
  for (auto& p : px) {
    for (auto& v : tmp) v = g(rng);
    PrepareRow(t, tmp.data(), kK, &p);
  }
  for (auto _ : state) {
    float acc = 0;
    for (int64_t j = 0; j < rows; ++j)
      for (const auto& p : px) acc += DotRow(w.data() + j * row_bytes, p);
    benchmark::DoNotOptimize(acc);
  }
  const double bytes = static_cast<double>(w.size()) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["membw_GBps"] = membw / 1e9;
  state.counters["membw_frac"] = benchmark::Counter(bytes / membw, benchmark::Counter::kIsRate);
  state.counters["isa"] = static_cast<double>(KernelIsa(CpuIsa(), t));
}

}  // namespace
}  // namespace lockstep::quant

int main(int argc, char** argv) {
  using namespace lockstep;
  if (bench::WantsHelp(argc, argv)) {
    std::fputs(quant::kUsage.text, stdout);
    std::printf("\nGoogle Benchmark's flags:\n");
    benchmark::PrintDefaultHelp();
    return 0;
  }
  // Initialize takes out of argv the flags it knows; anything left would be ignored and the whole
  // suite run, so it is a usage error (a --benchmark_ flag left is misspelt or lacks its =VALUE).
  benchmark::Initialize(&argc, argv);
  if (argc > 1) {
    const std::string a = argv[1];
    quant::kUsage.Error(a.rfind("--benchmark_", 0) == 0
                            ? a + ": not a Google Benchmark flag, or its =VALUE is missing"
                            : "unknown option " + a);
  }
  const double membw = ReadBandwidth().Measure(1);  // the benchmarks run on one thread
  std::printf("memory read bandwidth (1 thread, 512 MiB sum, best of 3): %.2f GB/s\n", membw / 1e9);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int batch : {1, 8}) {
      const std::string name = "Dot/" + std::string(Name(t)) + "/batch" + std::to_string(batch);
      benchmark::RegisterBenchmark(name.c_str(), quant::DotBench, t, batch, membw)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3)
          ->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Dot-kernel throughput per weight type (GB/s of weight bytes, 1-row and 8-row batches) next to
// a measured memory read bandwidth (large buffer sum); `membw_frac` is their ratio.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"

namespace lockstep::quant {
namespace {

constexpr int64_t kK = 4096;
constexpr size_t kWeightBytesTarget = 64u << 20;  // larger than the caches: a streaming read

// Read bandwidth in bytes/s: best of a few sums over a 256 MiB buffer.
double MeasureReadBandwidth() {
  std::vector<uint64_t> buf((256u << 20) / 8);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < buf.size(); i += 4) {
      s0 += buf[i];
      s1 += buf[i + 1];
      s2 += buf[i + 2];
      s3 += buf[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(buf.size() * 8) / sec);
  }
  return best;
}

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
  const double membw = quant::MeasureReadBandwidth();
  std::printf("memory read bandwidth (256 MiB sum, best of 4): %.2f GB/s\n", membw / 1e9);
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
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

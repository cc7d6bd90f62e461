// Machine read bandwidth for the benchmarks' "fraction of bandwidth" figures.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace lockstep {

// Read bandwidth over a 512 MiB buffer (far larger than the caches), split across `threads`
// threads summing with 8 independent accumulators. The buffer is filled once; each Measure()
// is the best of 3 passes, taken right before the decode run it is compared with (this VM's
// bandwidth drifts by tens of percent over a minute).
class ReadBandwidth {
 public:
  ReadBandwidth() : buf_((512u << 20) / 8) {
    for (size_t i = 0; i < buf_.size(); ++i) buf_[i] = i * 0x9E3779B97F4A7C15ull;
  }
  double Measure(int threads) {  // bytes/s
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint64_t> sums(static_cast<size_t>(threads));
      const size_t chunk = buf_.size() / static_cast<size_t>(threads);
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          uint64_t acc[8] = {};
          for (size_t i = chunk * t; i < chunk * (t + 1); i += 8)
            for (int k = 0; k < 8; ++k) acc[k] += buf_[i + k];
          uint64_t total = 0;
          for (uint64_t v : acc) total += v;
          sums[static_cast<size_t>(t)] = total;
        });
      for (auto& th : pool) th.join();
      benchmark::DoNotOptimize(sums.data());
      best = std::max(
          best, static_cast<double>(chunk * threads * 8) /
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  }

 private:
  std::vector<uint64_t> buf_;
};

}  // namespace lockstep

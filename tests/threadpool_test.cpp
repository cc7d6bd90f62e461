// ThreadPool under oversubscription: many back-to-back jobs whose helper counts change from job
// to job (7 threads on a 2-core machine) all complete, each index covered exactly once. A worker
// that mixed one job's generation with the next job's part count used to deadlock here.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/threadpool.h"

namespace lockstep {
namespace {

TEST(ThreadPool, BackToBackJobsOfChangingWidthAllComplete) {
  for (int threads : {2, 3, 7}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(64);
    int64_t expected = 0;
    for (int job = 0; job < 20000; ++job) {
      const int64_t n = 1 + (job * 7919) % 64;  // 1..64 items: from 1 to every worker helping
      pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      expected += n;
    }
    int64_t total = 0;
    for (auto& h : hits) total += h.load();
    EXPECT_EQ(total, expected) << threads << " threads";
  }
}

}  // namespace
}  // namespace lockstep

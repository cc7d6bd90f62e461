// A fixed-size worker pool with a blocking ParallelFor; owned by a backend, never global.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

// Work is split into contiguous index ranges. Callers must make each index's result
// independent of which thread runs it (lockstep's kernels compute an output element wholly
// inside one index), so the thread count never changes a bit of the output.
//
// Workers spin briefly on an atomic generation counter before sleeping on a condition variable:
// decode issues dozens of small parallel ops per token, and a sleep/wake round trip per op
// would cost more than the op.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(begin, end) over [0, n) split into equal chunks of at least `grain` (a few per
  // thread), which the caller and the workers claim in any order.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The same split, with fn(worker, begin, end) told which thread runs the chunk (0 = the
  // caller, < size()), so a kernel can use per-thread scratch it owns.
  using WorkerFn = std::function<void(int, int64_t, int64_t)>;
  void ParallelForWorker(int64_t n, int64_t grain, const WorkerFn& fn);

 private:
  void Worker(int index);
  void RunChunks(int worker);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  // Job fields are written before generation_ is released and read after it is acquired.
  const WorkerFn* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  int job_parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0};  // next chunk to claim
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace lockstep

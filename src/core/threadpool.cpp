// ThreadPool implementation: workers spin, then sleep, on a generation counter, then claim
// chunks from a shared counter alongside the caller, which waits for them the same way.
#include "core/threadpool.h"

#include <algorithm>

namespace lockstep {
namespace {

// Spin a few microseconds with pause, then yield the core (another runnable thread may need
// it: never burn a shared core), then sleep.
constexpr int kSpinIterations = 2000;
constexpr int kPauseIterations = 200;
// Chunks per thread: threads claim chunks from a shared counter, so a thread that is slowed
// (a busy core, a preempted vCPU) takes fewer chunks instead of holding everyone up. Every claim
// moves the counter's cache line between cores: a 2-thread job of 32 empty indices cost 5.5 us
// at 16 chunks a thread and 2.0 us at 4, and many decode products are 10-30 us in all.
constexpr int64_t kChunksPerThread = 4;

inline void CpuRelax(int i) {
  if (i < kPauseIterations) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { Worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  auto with_worker = [&fn](int, int64_t b, int64_t e) { fn(b, e); };
  ParallelForWorker(n, grain, with_worker);
}

void ThreadPool::ParallelForWorker(int64_t n, int64_t grain,
                                   FunctionRef<void(int, int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks =
      std::min<int64_t>(std::max<int64_t>(1, n / grain), int64_t{n_threads_} * kChunksPerThread);
  if (chunks == 1 || n_threads_ == 1) {
    fn(0, 0, n);
    return;
  }
  const int64_t chunk = (n + chunks - 1) / chunks;
  const int helpers = static_cast<int>(std::min<int64_t>(n_threads_ - 1, chunks - 1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_parts_ = helpers + 1;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(helpers, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  RunChunks(0);  // the caller works too
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i)
    CpuRelax(i);
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::RunChunks(int worker) {
  for (;;) {
    const int64_t begin = next_.fetch_add(1, std::memory_order_relaxed) * job_chunk_;
    if (begin >= job_n_) return;
    (*job_)(worker, begin, std::min(job_n_, begin + job_chunk_));
  }
}

void ThreadPool::Worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen &&
                    !stop_.load(std::memory_order_acquire);
         ++i)
      CpuRelax(i);
    // The job's generation and its part count are read together under the lock the caller
    // publishes them with. Read apart, a worker could take the generation of one job and the
    // parts of the next, run the next job's chunks, then run it again as "new" and decrement
    // pending_ twice: the count then never returned to 0 and the caller waited forever (a CI
    // hang of ForwardInvariance at 7 threads on 2 cores, caught by the test watchdog).
    int parts = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) ||
               generation_.load(std::memory_order_acquire) != seen;
      });
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      parts = job_parts_;
    }
    // A worker counted in this job (index < parts) holds the caller in it until it decrements,
    // so job_, next_ and pending_ stay this job's while it runs.
    if (index >= parts) continue;
    RunChunks(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's predicate check
      cv_done_.notify_one();
    }
  }
}

}  // namespace lockstep

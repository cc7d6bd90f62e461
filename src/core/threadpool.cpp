// ThreadPool implementation: workers wait for a generation counter and run one chunk each.
#include "core/threadpool.h"

#include <algorithm>

namespace lockstep {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { Worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_parts = std::max<int64_t>(1, n / grain);
  const int parts = static_cast<int>(std::min<int64_t>(n_threads_, max_parts));
  if (parts == 1) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  cv_start_.notify_all();
  fn(0, std::min(n, chunk));  // the caller runs part 0
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::Worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t begin, end;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_parts_) continue;
      job = job_;
      begin = index * job_chunk_;
      end = std::min(job_n_, begin + job_chunk_);
    }
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

}  // namespace lockstep

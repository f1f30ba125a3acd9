#include "runtime/cpu/thread_pool.h"

#include <algorithm>

namespace qd {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t lo = next_.fetch_add(grain_);
    if (lo >= end_) return;
    (*fn_)(lo, std::min(end_, lo + grain_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)> &fn) {
  if (end <= begin) return;
  int64_t n = end - begin;
  if (grain <= 0) grain = std::max<int64_t>(1, n / (8 * num_threads()));
  if (workers_.empty() || n <= grain) {
    for (int64_t lo = begin; lo < end; lo += grain) fn(lo, std::min(end, lo + grain));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    grain_ = grain;
    next_ = begin;
    busy_ = static_cast<int>(workers_.size());
    generation_++;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
}

}  // namespace qd

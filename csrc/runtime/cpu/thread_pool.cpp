#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace qd {

namespace {

// Polls `ready` for up to ~50 us; false if it never held (the caller then blocks).
template <class F>
bool spin_until(F ready) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 0;; i++) {
    if (ready()) return true;
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

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

void ThreadPool::run_chunks(Job &job) {
  for (;;) {
    int64_t lo = job.next.fetch_add(job.grain);
    if (lo >= job.end) return;
    (*job.fn)(lo, std::min(job.end, lo + job.grain));
    if (job.left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // pairs with the caller's predicate check
      done_.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    auto has_job = [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(has_job)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, has_job);
    }
    if (stop_) return;
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job = job_;
      seen = generation_.load(std::memory_order_relaxed);
    }
    if (job) run_chunks(*job);
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
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->end = end;
  job->grain = grain;
  job->next = begin;
  job->left = (n + grain - 1) / grain;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(*job);
  auto finished = [&] { return job->left.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
  }
}

}  // namespace qd

#pragma once
// A persistent pool of worker threads running one parallel range at a time. The calling thread
// works too; chunks are claimed from an atomic counter, so uneven iterations balance out. Threads
// spin briefly before sleeping, so back-to-back launches do not pay a wake-up each.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qd {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(lo, hi) over [begin, end) in chunks of `grain` iterations (0: pick one).
  void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};  // changed under mutex_, read by spinning threads
  std::atomic<int> busy_{0};             // workers that have not finished the current job
  std::atomic<bool> stop_{false};
  // The current job.
  const std::function<void(int64_t, int64_t)> *fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace qd

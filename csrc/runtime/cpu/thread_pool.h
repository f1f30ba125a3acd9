#pragma once
// A persistent pool of worker threads running one parallel range at a time. The calling thread
// works too; chunks are claimed from an atomic counter, so uneven iterations balance out, and the
// call returns when the last chunk finishes (whichever threads ran them). Threads spin briefly
// before sleeping, so back-to-back launches do not pay a wake-up each.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  // One parallel range. Workers that wake late find its chunks all claimed and leave it alone; the
  // caller returns once every chunk has finished, without waiting for workers that never came
  // (a loaded host may not schedule them for a while).
  struct Job {
    const std::function<void(int64_t, int64_t)> *fn;
    int64_t end, grain;
    std::atomic<int64_t> next;
    std::atomic<int64_t> left;  // chunks not yet finished
  };
  void worker_loop();
  void run_chunks(Job &job);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};  // changed under mutex_, read by spinning threads
  std::atomic<bool> stop_{false};
  std::shared_ptr<Job> job_;  // the latest job (under mutex_); a late worker may still hold the one before
};

}  // namespace qd

// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of N threads runs N - 1 workers. One caller at a time.
//
// A decode step is a few hundred short parallel loops (tens to hundreds of microseconds each), and
// waking a sleeping thread costs about as much on a VM (the wake-up goes through the hypervisor).
// So after each loop the workers spin for a short while (kSpin) watching for the next one, and
// only then sleep on a condition variable; the caller spins, then yields, while it waits for them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint ranges covering [0, n), split into at most size() pieces
  // whose boundaries are multiples of `grain`. Returns when every piece is done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // How long an idle worker keeps polling for the next loop before it sleeps.
  static constexpr std::chrono::microseconds kSpin{2000};

 private:
  void worker(int index);
  void run_piece(int index);

  std::vector<std::thread> workers_;
  // The loop being run; written by the caller before it publishes a new generation.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  int pieces_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current loop
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards sleepers_ and the sleep / wake hand-over
  std::condition_variable wake_cv_;
  int sleepers_ = 0;
};

// Physical cores of this machine (hyper-threads do not help bandwidth-bound kernels).
int physical_cores();

}  // namespace ts

// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of N threads runs N - 1 workers. One caller at a time.
//
// A decode step is a few hundred short parallel loops (tens to hundreds of microseconds each), and
// waking a sleeping thread costs about as much on a VM (the wake-up goes through the hypervisor).
// So after each loop the workers spin for a short while (kSpin) watching for the next one, and
// only then sleep on a condition variable; the caller spins, then yields, while it waits for them.
//
// A loop is cut into a few pieces per thread, which the threads claim one at a time: on a shared
// machine a worker that is late (asleep, or preempted by another process) leaves its pieces to
// the others instead of holding the loop up, and the caller only ever waits for pieces that are
// already running.
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
  // Calls fn(begin, end) on disjoint ranges covering [0, n), at most kPiecesPerThread x size() of
  // them, whose boundaries are multiples of `grain`; any thread may run any range. Returns when
  // every range is done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // How long an idle worker keeps polling for the next loop before it sleeps.
  static constexpr std::chrono::microseconds kSpin{2000};
  static constexpr int kPiecesPerThread = 4;

 private:
  void worker();
  // Claims and runs pieces of loop `generation` until none is left (or a newer loop started).
  void run_pieces(uint32_t generation);

  std::vector<std::thread> workers_;
  // The loop being run; written by the caller before it publishes a new generation, and stable
  // while any of its pieces is claimed and not done.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  // The claim word: generation (high 32 bits), piece count (16 bits), next piece (low 16 bits).
  // One word, so a claim (compare-and-swap) can never take a piece of a loop it did not see.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};  // pieces of the current loop finished
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards sleepers_ and the sleep / wake hand-over
  std::condition_variable wake_cv_;
  int sleepers_ = 0;
};

// Physical cores of this machine (hyper-threads do not help bandwidth-bound kernels).
int physical_cores();

}  // namespace ts

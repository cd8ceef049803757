#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

namespace ts {

namespace {

// Tells the core this is a spin-wait (saves power, yields the pipeline to a sibling thread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_piece(int index) {
  if (index >= pieces_) return;
  const int64_t blocks = (n_ + grain_ - 1) / grain_;
  const int64_t begin = std::min(n_, blocks * index / pieces_ * grain_);
  const int64_t end = std::min(n_, blocks * (index + 1) / pieces_ * grain_);
  if (begin < end) (*fn_)(begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t blocks = (n + grain - 1) / grain;
  if (workers_.empty() || blocks == 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  pieces_ = static_cast<int>(std::min<int64_t>(blocks, size()));
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  bool wake = false;
  {
    // Under the mutex, so that a worker about to sleep either sees the new generation or is
    // counted in sleepers_ and gets the notification.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_cv_.notify_all();
  run_piece(0);
  // The workers are running their pieces: spin briefly, then give the core away while waiting
  // (a worker may have been preempted by another process).
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; g == seen && !stop_.load(std::memory_order_acquire); ++i) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
      // Reading the clock costs more than a pause: look at it every 64 polls.
      if (g == seen && i % 64 == 63 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        wake_cv_.wait(lock, [&] {
          return stop_.load(std::memory_order_acquire) ||
                 generation_.load(std::memory_order_acquire) != seen;
        });
        --sleepers_;
        g = generation_.load(std::memory_order_acquire);
      }
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = g;
    run_piece(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

int physical_cores() {
  // Count distinct (physical id, core id) pairs; fall back to the logical count.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = line.substr(line.find(':') + 1);
    if (line.rfind("core id", 0) == 0) cores.insert({phys, line.substr(line.find(':') + 1)});
  }
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.empty()) return logical > 0 ? logical : 1;
  return static_cast<int>(cores.size());
}

}  // namespace ts

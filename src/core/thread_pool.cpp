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
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_pieces(uint32_t generation) {
  uint64_t cur = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t index = cur & 0xFFFF, pieces = (cur >> 16) & 0xFFFF;
    if ((cur >> 32) != generation || index >= pieces) return;
    if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    const int64_t blocks = (n_ + grain_ - 1) / grain_;
    const int64_t p = static_cast<int64_t>(pieces), i = static_cast<int64_t>(index);
    const int64_t begin = std::min(n_, blocks * i / p * grain_);
    const int64_t end = std::min(n_, blocks * (i + 1) / p * grain_);
    if (begin < end) (*fn_)(begin, end);
    done_.fetch_add(1, std::memory_order_release);
    cur = claim_.load(std::memory_order_acquire);
  }
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
  const int pieces = static_cast<int>(std::min<int64_t>(blocks, kPiecesPerThread * size()));
  done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(static_cast<uint64_t>(generation) << 32 | static_cast<uint64_t>(pieces) << 16,
               std::memory_order_release);
  bool wake = false;
  {
    // Under the mutex, so that a worker about to sleep either sees the new generation or is
    // counted in sleepers_ and gets the notification.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(generation, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_cv_.notify_all();
  run_pieces(generation);
  // Only pieces another thread is running are left: spin briefly, then give the core away while
  // waiting (that thread may have been preempted by another process).
  for (int spins = 0; done_.load(std::memory_order_acquire) != pieces; ++spins) {
    if (spins < 4096)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::worker() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
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
    run_pieces(g);
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

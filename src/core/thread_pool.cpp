#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

namespace ts {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    pieces_ = static_cast<int>(std::min<int64_t>(blocks, size()));
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  run_piece(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_piece(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
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

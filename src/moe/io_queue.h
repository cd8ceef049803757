// A few threads that run positional reads in the background, so that expert reads overlap with
// compute (on the experts already present, and with the next layer's attention when prefetching).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class IoQueue {
 public:
  explicit IoQueue(int threads);
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  // Runs `job` on a worker; the future carries its exception, if any.
  std::shared_future<void> submit(std::function<void()> job);

 private:
  void worker();
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stop_ = false;
};

}  // namespace ts

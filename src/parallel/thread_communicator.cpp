#include "parallel/thread_communicator.h"

#include <atomic>
#include <barrier>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace ts {
namespace {

// What the ranks post for a collective; read by every rank between two barriers.
struct Group {
  explicit Group(int n) : ranks(n), bar(n), ptr(n), count(n), exchange(n) {}
  int ranks;
  std::barrier<> bar;
  std::atomic<bool> failed{false};
  std::vector<const float*> ptr;
  std::vector<int64_t> count;
  std::vector<const RowExchange*> exchange;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}
  std::string name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int size() const override { return g_->ranks; }

  void all_reduce_sum(float* x, int64_t n) override {
    const auto me = static_cast<size_t>(rank_);
    g_->ptr[me] = x;
    g_->count[me] = n;
    sync();
    for (int64_t c : g_->count)
      if (c != n)
        fail(ErrorKind::Runtime, "internal: all_reduce_sum of " + std::to_string(n) +
                                     " floats on one rank, " + std::to_string(c) + " on another");
    std::vector<float> sum(g_->ptr[0], g_->ptr[0] + n);
    for (int r = 1; r < g_->ranks; ++r) {
      const float* y = g_->ptr[static_cast<size_t>(r)];
      for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += y[i];
    }
    sync();  // every rank has read every x before any is overwritten
    std::memcpy(x, sum.data(), static_cast<size_t>(n) * sizeof(float));
  }

  void exchange_rows(const float* send, float* recv, int64_t width, const RowExchange& x) override {
    check_row_exchange(x, g_->ranks);
    const auto me = static_cast<size_t>(rank_);
    g_->ptr[me] = send;
    g_->count[me] = width;
    g_->exchange[me] = &x;
    sync();
    // Every rank checks every pair, so that all of them fail together.
    for (size_t p = 0; p < g_->exchange.size(); ++p)
      for (size_t q = 0; q < g_->exchange.size(); ++q)
        if (g_->exchange[p]->send_rows[q] != g_->exchange[q]->recv_rows[p] ||
            g_->count[p] != g_->count[q])
          fail(ErrorKind::Runtime, "internal: rank " + std::to_string(p) + " sends " +
                                       std::to_string(g_->exchange[p]->send_rows[q]) +
                                       " rows to rank " + std::to_string(q) + ", which expects " +
                                       std::to_string(g_->exchange[q]->recv_rows[p]));
    const auto row_bytes = static_cast<size_t>(width) * sizeof(float);
    for (size_t p = 0; p < g_->exchange.size(); ++p) {
      const RowExchange& theirs = *g_->exchange[p];
      std::memcpy(recv + x.recv_row0[p] * width, g_->ptr[p] + theirs.send_row0[me] * width,
                  static_cast<size_t>(x.recv_rows[p]) * row_bytes);
    }
    sync();  // every rank has read every send buffer before any is reused
  }

  void barrier() override { sync(); }

  // A barrier that fails once any rank has failed (run_ranks drops a failed rank from it).
  void sync() {
    g_->bar.arrive_and_wait();
    if (g_->failed.load()) fail(ErrorKind::Runtime, "another rank failed");
  }
  void abandon() {
    g_->failed.store(true);
    g_->bar.arrive_and_drop();
  }

 private:
  std::shared_ptr<Group> g_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int ranks) {
  if (ranks < 1) fail(ErrorKind::Usage, "ranks must be at least 1, not " + std::to_string(ranks));
  auto g = std::make_shared<Group>(ranks);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadCommunicator>(g, r));
  return out;
}

void run_ranks(const std::vector<std::unique_ptr<Communicator>>& comms,
               const std::function<void(Communicator&)>& body) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (const auto& c : comms)
    threads.emplace_back([&, comm = c.get()] {
      try {
        body(*comm);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!first) first = std::current_exception();
        }
        if (auto* t = dynamic_cast<ThreadCommunicator*>(comm)) t->abandon();
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace ts

// The server's front door: it owns the listening socket and reads every request head itself, on
// one thread with poll(), before a worker is involved. A connection then holds a worker only once
// its head has arrived whole and within the limits, and the workers are bounded:
//   * heads that break a limit are answered at once (414, 431, 413, 400) and closed;
//   * a head not complete within `head_timeout` gets 408 (slow-header clients hold no thread);
//   * beyond `max_pending` connections still sending heads, or a complete head when all
//     `request_workers` are busy, the answer is an immediate 503 with Retry-After;
//   * GET /health and /metrics go to `control_workers` of their own, so they answer while every
//     request worker streams a generation.
// Each connection carries one request (the response says Connection: close).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "server/request_head.h"

namespace ts::server {

struct GateOptions {
  HttpLimits limits;
  size_t request_workers = 64;
  size_t control_workers = 4;
  size_t max_pending = 512;  // connections whose head has not all arrived
  std::chrono::milliseconds head_timeout{10000};
};

// What a refusal looks like on the wire: an HTTP/1.1 response with a JSON body and
// Connection: close (and Retry-After for 503).
using RefusalWriter = std::function<std::string(int status, const std::string& message)>;

class ConnectionGate {
 public:
  // Runs on a worker thread for every admitted request; `fd` is closed after it returns.
  using Serve = std::function<void(int fd, std::string buffered, size_t head_bytes)>;

  ConnectionGate(const GateOptions& options, Serve serve, RefusalWriter refusal);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Binds and listens; returns the port (the chosen one when `port` is 0), -1 when it cannot.
  int bind(const std::string& host, int port);
  // Accepts and judges connections until stop(), then waits for the workers to finish; false
  // when the listening socket failed.
  bool run();
  // Safe from any thread, before or during run().
  void stop();

 private:
  struct Pending;
  // Starts a worker on the connection (taking `buffered`), or answers 503 when its lane is full:
  // false then, and the caller drains the connection before closing it.
  bool admit(int fd, std::string& buffered, const HeadVerdict& v);
  // Writes a refusal and ends the sending side; the caller drains and closes.
  void refuse(int fd, int status, const std::string& message);

  GateOptions o_;
  Serve serve_;
  RefusalWriter refusal_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: stop() writes to it to end run()'s poll
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> busy_requests_{0};
  std::atomic<size_t> busy_control_{0};
  std::atomic<size_t> draining_{0};  // answered connections being drained before their close
  std::mutex mu_;
  std::condition_variable idle_;  // a worker ended
};

}  // namespace ts::server

#include "server/connection_gate.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>
#include <vector>

namespace ts::server {
namespace {

using Clock = std::chrono::steady_clock;

// After a refusal the client may still be sending (a body the server will not read): its input is
// read and dropped for a while before the close, since closing with unread input resets the
// connection and the client would never see the answer.
constexpr auto kDrainTime = std::chrono::milliseconds(1000);
constexpr size_t kDrainBytes = 1u << 20;
constexpr size_t kReadChunk = 16u << 10;
// Workers' connections draining at once; beyond, a connection is closed as soon as answered.
constexpr size_t kMaxDraining = 256;

void close_fd(int fd) {
  while (::close(fd) != 0 && errno == EINTR) {
  }
}

// A worker's end of a connection: what the client still sends (a body the handler refused) is
// read and dropped for a while, so that the close does not reset the connection before the client
// has read the answer.
void drain_and_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[kReadChunk];
  size_t drained = 0;
  const Clock::time_point until = Clock::now() + kDrainTime;
  while (drained <= kDrainBytes) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
    if (n > 0) drained += static_cast<size_t>(n);
  }
  close_fd(fd);
}

int listen_socket(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // No SO_REUSEPORT: a second server must be refused a port in use, not share it.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      close_fd(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
}

}  // namespace

struct ConnectionGate::Pending {
  int fd;
  std::string buffered;
  Clock::time_point deadline;
  bool draining = false;  // refused: reading and dropping input until EOF or the deadline
  size_t drained = 0;
};

ConnectionGate::ConnectionGate(const GateOptions& options, Serve serve, RefusalWriter refusal)
    : o_(options), serve_(std::move(serve)), refusal_(std::move(refusal)) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
}

ConnectionGate::~ConnectionGate() {
  if (listen_fd_ >= 0) close_fd(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) close_fd(fd);
}

int ConnectionGate::bind(const std::string& host, int port) {
  listen_fd_ = listen_socket(host, port);
  return listen_fd_ < 0 ? -1 : bound_port(listen_fd_);
}

void ConnectionGate::stop() {
  stopping_ = true;
  if (wake_[1] >= 0) {
    const char c = 0;
    [[maybe_unused]] const ssize_t r = ::write(wake_[1], &c, 1);
  }
}

void ConnectionGate::refuse(int fd, int status, const std::string& message) {
  const std::string text = refusal_(status, message);
  // A fresh connection's send buffer takes a refusal whole; a client that does not read it loses
  // it.
  [[maybe_unused]] const ssize_t r =
      ::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
}

bool ConnectionGate::admit(int fd, std::string& buffered, const HeadVerdict& v) {
  std::atomic<size_t>& busy = v.control ? busy_control_ : busy_requests_;
  const size_t limit = v.control ? o_.control_workers : o_.request_workers;
  // Only this thread raises the counts, so checking then raising cannot overshoot.
  if (busy >= limit) {
    refuse(fd, 503,
           v.control ? "the server's status lane is busy; retry in a second"
                     : "the server is at its limit of " + std::to_string(limit) +
                           " requests in progress; retry in a second");
    return false;
  }
  ++busy;
  try {
    std::thread([this, fd, buffered = std::move(buffered), head = v.head_bytes, &busy]() mutable {
      serve_(fd, std::move(buffered), head);
      // The answer is out: the lane is free while the connection drains, and the drains are
      // bounded on their own.
      {
        std::lock_guard<std::mutex> lock(mu_);
        --busy;
        ++draining_;
      }
      if (draining_ <= kMaxDraining)
        drain_and_close(fd);
      else
        close_fd(fd);
      std::lock_guard<std::mutex> lock(mu_);
      --draining_;
      idle_.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    --busy;
    refuse(fd, 503, "the server cannot start another thread; retry in a second");
    return false;
  }
  return true;
}

bool ConnectionGate::run() {
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  bool ok = listen_fd_ >= 0;
  char chunk[kReadChunk];
  while (ok && !stopping_) {
    const Clock::time_point now = Clock::now();
    // Heads past their time: 408; drains past theirs: closed.
    for (size_t i = 0; i < pending.size();) {
      Pending& p = pending[i];
      if (now < p.deadline) {
        ++i;
        continue;
      }
      if (!p.draining) {
        refuse(p.fd, 408,
               "the request head did not arrive within " + std::to_string(o_.head_timeout.count()) +
                   " ms");
        p.draining = true;
        p.deadline = now + kDrainTime;
        ++i;
        continue;
      }
      close_fd(p.fd);
      pending[i] = std::move(pending.back());
      pending.pop_back();
    }
    fds.assign({{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    Clock::time_point next = now + std::chrono::seconds(1);
    for (const Pending& p : pending) {
      fds.push_back({p.fd, POLLIN, 0});
      next = std::min(next, p.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    const int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 1)));
    if (r < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    if (fds[0].revents != 0) break;
    // Connections that sent something: read it, then judge the head so far.
    std::vector<size_t> gone;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      Pending& p = pending[i];
      const ssize_t n = ::recv(p.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        close_fd(p.fd);
        gone.push_back(i);
        continue;
      }
      if (p.draining) {
        p.drained += static_cast<size_t>(n);
        if (p.drained > kDrainBytes) p.deadline = now;
        continue;
      }
      p.buffered.append(chunk, static_cast<size_t>(n));
      const HeadVerdict v = check_head(p.buffered, o_.limits);
      if (v.state == HeadState::Refused) {
        refuse(p.fd, v.status, v.message);
        p.draining = true;
        p.deadline = now + kDrainTime;
      } else if (v.state == HeadState::Complete) {
        if (admit(p.fd, p.buffered, v)) {
          gone.push_back(i);
        } else {
          p.draining = true;
          p.deadline = now + kDrainTime;
        }
      }
    }
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) {
      pending[*it] = std::move(pending.back());
      pending.pop_back();
    }
    if ((fds[1].revents & (POLLERR | POLLNVAL)) != 0) {
      ok = false;
      break;
    }
    if ((fds[1].revents & POLLIN) == 0) continue;
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;  // none left (EAGAIN), or out of descriptors: the next poll retries
      if (pending.size() >= o_.max_pending) {
        refuse(fd, 503,
               "the server has " + std::to_string(o_.max_pending) +
                   " connections still sending their requests; retry in a second");
        // Refusals drain too, up to as many again; beyond that a flood is closed unread.
        if (pending.size() >= 2 * o_.max_pending)
          close_fd(fd);
        else
          pending.push_back({fd, {}, now + kDrainTime, true, 0});
        continue;
      }
      pending.push_back({fd, {}, now + o_.head_timeout, false, 0});
    }
  }
  for (const Pending& p : pending) close_fd(p.fd);
  // Stopped: while the workers finish, new connections are refused (not left in the backlog).
  if (listen_fd_ >= 0) {
    close_fd(listen_fd_);
    listen_fd_ = -1;
  }
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return busy_requests_ == 0 && busy_control_ == 0 && draining_ == 0; });
  return ok;
}

}  // namespace ts::server

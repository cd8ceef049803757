#include "parallel/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>

#include "core/error.h"

namespace ts {
namespace {

using Clock = std::chrono::steady_clock;

// A socket closed when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string where(const DistInit& at) {
  return "--dist-init " + at.host + ":" + std::to_string(at.port);
}

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `fd` to be ready for `events` before the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, ms_left(deadline)) == 1;
}

void send_all(int fd, const void* data, size_t n, const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) fail(ErrorKind::Runtime, what + ": the connection closed while sending");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void recv_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) fail(ErrorKind::Runtime, what + ": timed out");
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) fail(ErrorKind::Runtime, what + ": the connection closed");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

std::vector<char> serve(const DistInit& at, int size, const std::vector<char>& blob,
                        Clock::time_point deadline) {
  Fd listener(::socket(AF_INET6, SOCK_STREAM, 0));
  if (listener.fd < 0) fail(ErrorKind::Runtime, where(at) + ": socket: " + std::strerror(errno));
  const int on = 1, off = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  addr.sin6_port = htons(static_cast<uint16_t>(at.port));
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.fd, size) != 0)
    fail(ErrorKind::Runtime, where(at) + ": rank 0 cannot listen on port " +
                                 std::to_string(at.port) + ": " + std::strerror(errno));
  std::vector<Fd> peers(static_cast<size_t>(size));
  for (int joined = 1; joined < size; ++joined) {
    if (!wait_for(listener.fd, POLLIN, deadline))
      fail(ErrorKind::Runtime, where(at) + ": " + std::to_string(joined) + " of " +
                                   std::to_string(size) + " ranks joined before the time ran out");
    Fd c(::accept(listener.fd, nullptr, nullptr));
    if (c.fd < 0) fail(ErrorKind::Runtime, where(at) + ": accept: " + std::strerror(errno));
    int32_t hello[2];
    recv_all(c.fd, hello, sizeof hello, deadline, where(at) + ": a rank's greeting");
    if (hello[1] != size)
      fail(ErrorKind::Runtime, where(at) + ": rank " + std::to_string(hello[0]) + " says " +
                                   std::to_string(hello[1]) + " ranks, rank 0 " +
                                   std::to_string(size));
    if (hello[0] < 1 || hello[0] >= size || peers[static_cast<size_t>(hello[0])].fd >= 0)
      fail(ErrorKind::Runtime, where(at) + ": rank " + std::to_string(hello[0]) +
                                   " joined twice or is out of range 1.." +
                                   std::to_string(size - 1));
    peers[static_cast<size_t>(hello[0])] = std::move(c);
  }
  const auto n = static_cast<uint32_t>(blob.size());
  for (int r = 1; r < size; ++r) {
    const std::string what = where(at) + ": sending to rank " + std::to_string(r);
    send_all(peers[static_cast<size_t>(r)].fd, &n, sizeof n, what);
    send_all(peers[static_cast<size_t>(r)].fd, blob.data(), blob.size(), what);
  }
  return blob;
}

std::vector<char> join(const DistInit& at, int rank, int size, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int e = ::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &found))
    fail(ErrorKind::Usage, where(at) + ": " + ::gai_strerror(e));
  const std::string me = where(at) + ": rank " + std::to_string(rank);
  // Rank 0 may not listen yet: try again until the deadline.
  Fd s;
  while (s.fd < 0) {
    for (addrinfo* a = found; a != nullptr && s.fd < 0; a = a->ai_next) {
      Fd c(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (c.fd >= 0 && ::connect(c.fd, a->ai_addr, a->ai_addrlen) == 0) s = std::move(c);
    }
    if (s.fd >= 0) break;
    if (ms_left(deadline) == 0) {
      ::freeaddrinfo(found);
      fail(ErrorKind::Runtime, me + " could not reach rank 0 before the time ran out");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
  const int32_t hello[2] = {rank, size};
  send_all(s.fd, hello, sizeof hello, me);
  uint32_t n = 0;
  recv_all(s.fd, &n, sizeof n, deadline, me + " waiting for rank 0");
  std::vector<char> blob(n);
  recv_all(s.fd, blob.data(), n, deadline, me + " waiting for rank 0");
  return blob;
}

}  // namespace

DistInit parse_dist_init(const std::string& s) {
  const size_t colon = s.rfind(':');
  const auto bad = [&] {
    fail(ErrorKind::Usage, "--dist-init: expected HOST:PORT (port 1-65535), got '" + s + "'");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) bad();
  DistInit d;
  d.host = s.substr(0, colon);
  if (d.host.front() == '[' && d.host.back() == ']') d.host = d.host.substr(1, d.host.size() - 2);
  const std::string port = s.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) bad();
  d.port = std::stoi(port);
  if (d.port < 1 || d.port > 65535) bad();
  return d;
}

std::vector<char> rendezvous_broadcast(const DistInit& at, int rank, int size,
                                       const std::vector<char>& blob, int timeout_ms) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorKind::Usage,
         where(at) + ": rank " + std::to_string(rank) + " of " + std::to_string(size));
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  return rank == 0 ? serve(at, size, blob, deadline) : join(at, rank, size, deadline);
}

}  // namespace ts

#include "server/socket_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ts::server {
namespace {

thread_local const SocketStream* tl_stream = nullptr;

// Waits up to `ms` for `events` on fd; false on timeout or error.
bool wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, std::max(ms, 0));
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r == 0 || errno != EINTR) return false;
  }
}

int ms_until(SocketStream::Clock::time_point t) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(t - SocketStream::Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

}  // namespace

SocketStream::SocketStream(int fd, std::string buffered, Clock::time_point read_deadline,
                           size_t max_read, std::chrono::milliseconds write_timeout)
    : fd_(fd),
      buffered_(std::move(buffered)),
      read_deadline_(read_deadline),
      max_read_(max_read),
      write_timeout_(write_timeout) {}

bool SocketStream::is_readable() const {
  return replayed_ < buffered_.size() || wait_for(fd_, POLLIN, ms_until(read_deadline_));
}

// Writable, and the peer has not closed its end: a client that leaves is noticed here, which
// cancels its generation.
bool SocketStream::is_writable() const {
  if (!wait_for(fd_, POLLOUT, static_cast<int>(write_timeout_.count()))) return false;
  char c;
  const ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

ssize_t SocketStream::read(char* ptr, size_t size) {
  if (replayed_ < buffered_.size()) {
    const size_t n = std::min(size, buffered_.size() - replayed_);
    std::memcpy(ptr, buffered_.data() + replayed_, n);
    replayed_ += n;
    return static_cast<ssize_t>(n);
  }
  if (read_ >= max_read_) {
    over_limit_ = true;
    return -1;
  }
  size = std::min(size, max_read_ - read_);
  for (;;) {
    if (!wait_for(fd_, POLLIN, ms_until(read_deadline_))) return -1;
    const ssize_t r = ::recv(fd_, ptr, size, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (r > 0) read_ += static_cast<size_t>(r);
    return r;
  }
}

ssize_t SocketStream::write(const char* ptr, size_t size) {
  for (;;) {
    if (!wait_for(fd_, POLLOUT, static_cast<int>(write_timeout_.count()))) return -1;
    const ssize_t r = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    return r;
  }
}

void SocketStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
}

void SocketStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
}

const SocketStream* current_stream() {
  return tl_stream;
}
void set_current_stream(const SocketStream* s) {
  tl_stream = s;
}

}  // namespace ts::server

// httplib::Stream over one accepted connection, for httplib::Server::process_request: it first
// replays the bytes the connection gate already read (the request head), then reads the socket
// against one deadline for the whole request and a cap on the bytes read, so a client that sends
// its body slowly, or a chunked body without end, holds its worker for a bounded time and memory.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace ts::server {

class SocketStream : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  SocketStream(int fd, std::string buffered, Clock::time_point read_deadline, size_t max_read,
               std::chrono::milliseconds write_timeout);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  // Whether a read was refused because the request went past `max_read` bytes.
  bool over_limit() const { return over_limit_; }

 private:
  int fd_;
  std::string buffered_;
  size_t replayed_ = 0;
  Clock::time_point read_deadline_;
  size_t max_read_;
  size_t read_ = 0;
  bool over_limit_ = false;
  std::chrono::milliseconds write_timeout_;
};

// The stream the calling worker thread is serving (null on other threads): request handlers ask
// it why a body could not be read.
const SocketStream* current_stream();
void set_current_stream(const SocketStream* s);

}  // namespace ts::server

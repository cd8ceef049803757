// httplib's request parsing, routing and response writing (httplib::Server::process_request), run
// by the connection gate's workers on a connection the gate has already judged: the gate owns the
// listening socket, so httplib's own listen loop serves nothing.
#pragma once

#include <httplib.h>

#include <mutex>
#include <thread>

namespace ts::server {

class RequestServer : public httplib::Server {
 public:
  ~RequestServer() override;

  // Parses one request from `stream`, routes it and writes the response (Connection: close).
  void serve(httplib::Stream& stream);

  // httplib sends a streamed body only while it counts itself running, which is while its own
  // listen loop runs. That loop is given a Unix socket whose name is removed at once: it waits
  // in accept() for a connection that cannot come, until stop_idle_loop(), which also ends the
  // streams in progress. A Runtime error when the socket cannot be made.
  void start_idle_loop();
  // From the signal thread and from serve(): whichever comes second finds it done.
  void stop_idle_loop();

 private:
  std::mutex loop_mu_;
  std::thread loop_;
};

}  // namespace ts::server

#include "server/request_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ts::server {
namespace {

// The idle loop is handed no connection, so its queue never runs anything.
struct NoTasks : httplib::TaskQueue {
  void enqueue(std::function<void()>) override {}
  void shutdown() override {}
};

}  // namespace

RequestServer::~RequestServer() {
  stop_idle_loop();
}

void RequestServer::serve(httplib::Stream& stream) {
  bool closed = false;
  process_request(stream, true, closed, nullptr);
}

void RequestServer::start_idle_loop() {
  // A name in a directory only this user can enter, removed as soon as the socket listens.
  char dir[] = "/tmp/turbospark-XXXXXX";
  if (::mkdtemp(dir) == nullptr) fail(ErrorKind::Runtime, "cannot make a temporary directory");
  const std::string path = std::string(dir) + "/idle";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::listen(fd, 1) == 0;
  ::unlink(path.c_str());
  ::rmdir(dir);
  if (!ok) {
    if (fd >= 0) ::close(fd);
    fail(ErrorKind::Runtime, "cannot start the HTTP layer's idle listen loop");
  }
  svr_sock_ = fd;
  new_task_queue = [] { return new NoTasks; };
  loop_ = std::thread([this] { listen_after_bind(); });
  while (!is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void RequestServer::stop_idle_loop() {
  std::lock_guard<std::mutex> lock(loop_mu_);
  if (!loop_.joinable()) return;
  stop();
  loop_.join();
}

}  // namespace ts::server

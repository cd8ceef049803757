#include "moe/io_fault.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace ts {
namespace {

struct Armed {
  std::atomic<int> fault{static_cast<int>(IoFault::None)};
  std::atomic<int64_t> countdown{0};
  Armed() {
    const char* env = std::getenv("TS_IO_FAULT");
    if (env == nullptr) return;
    const std::string s = env;
    const size_t colon = s.find(':');
    const std::string kind = s.substr(0, colon);
    const int64_t after = colon == std::string::npos ? 1 : std::atoll(s.c_str() + colon + 1);
    if (kind == "error") arm(IoFault::Error, after);
    if (kind == "short") arm(IoFault::Short, after);
  }
  void arm(IoFault f, int64_t after) {
    countdown = after < 1 ? 1 : after;
    fault = static_cast<int>(f);
  }
};

Armed& armed() {
  static Armed a;
  return a;
}

}  // namespace

void set_io_fault(IoFault fault, int64_t after) {
  armed().arm(fault, after);
}

IoFault take_io_fault() {
  Armed& a = armed();
  if (a.fault.load(std::memory_order_relaxed) == static_cast<int>(IoFault::None))
    return IoFault::None;
  if (a.countdown.fetch_sub(1) != 1) return IoFault::None;
  return static_cast<IoFault>(a.fault.exchange(static_cast<int>(IoFault::None)));
}

}  // namespace ts

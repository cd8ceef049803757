#include "core/memory_stats.h"

#include <fstream>
#include <string>

namespace ts {
namespace {

uint64_t status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
  return 0;
}

}  // namespace

uint64_t peak_rss_bytes() {
  return status_kib("VmHWM");
}
uint64_t current_rss_bytes() {
  return status_kib("VmRSS");
}

}  // namespace ts

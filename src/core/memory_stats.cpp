#include "core/memory_stats.h"

#include <link.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <set>
#include <sstream>
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

// The files of the loaded objects: the executable (which the loader lists without a name) and
// every shared library. The vDSO's name is not a file and matches no mapping.
std::set<std::string> loaded_object_paths() {
  std::set<std::string> paths;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) paths.emplace(exe, static_cast<size_t>(n));
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] == '/') {
          char real[PATH_MAX];
          if (realpath(info->dlpi_name, real) != nullptr)
            static_cast<std::set<std::string>*>(out)->insert(real);
        }
        return 0;
      },
      &paths);
  return paths;
}

}  // namespace

uint64_t peak_rss_bytes() {
  return status_kib("VmHWM");
}
uint64_t current_rss_bytes() {
  return status_kib("VmRSS");
}

uint64_t program_rss_bytes() {
  const std::set<std::string> objects = loaded_object_paths();
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool counted = false;  // whether the mapping being read is one of the objects'
  uint64_t kib = 0;
  while (std::getline(in, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields follow as
    // "Name:  value kB" lines.
    if (line.empty()) continue;
    if (line.rfind("Rss:", 0) == 0) {
      if (counted) kib += std::stoull(line.substr(4));
      continue;
    }
    const size_t colon = line.find(':');
    const size_t space = line.find(' ');
    if (colon != std::string::npos && space != std::string::npos && colon < space) continue;
    std::istringstream header(line);
    std::string range, perms, offset, dev, inode, path;
    header >> range >> perms >> offset >> dev >> inode;
    std::getline(header >> std::ws, path);
    counted = objects.count(path) != 0;
  }
  return kib * 1024;
}

}  // namespace ts

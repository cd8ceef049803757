#include "backend/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

namespace ts {
namespace {

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace

void* open_plugin(const char* file, const char* env_var, std::string* error) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(env_var)) candidates.emplace_back(env);
  const std::string dir = exe_dir();
  candidates.push_back(dir + "/" + file);
  candidates.push_back(dir + "/../" + file);
#ifdef TURBOSPARK_INSTALLED_PLUGIN_DIR
  // Where `cmake --install` and the package put it.
  candidates.push_back(dir + "/" TURBOSPARK_INSTALLED_PLUGIN_DIR "/" + file);
#endif
  candidates.emplace_back(file);
  for (const std::string& c : candidates) {
    if (void* handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    *error = ::dlerror();
  }
  return nullptr;
}

}  // namespace ts

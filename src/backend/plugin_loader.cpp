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

void* open_plugin(const char* file, const char* env_var, const std::vector<const char*>& symbols,
                  std::vector<void*>* resolved, std::string* error) {
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
  void* handle = nullptr;
  for (const std::string& c : candidates) {
    handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    *error = ::dlerror();
  }
  if (handle == nullptr) return nullptr;
  resolved->clear();
  for (const char* name : symbols) {
    resolved->push_back(::dlsym(handle, name));
    if (resolved->back() == nullptr) {
      *error = std::string(file) + " lacks its entry point " + name;
      ::dlclose(handle);
      return nullptr;
    }
  }
  return handle;
}

}  // namespace ts

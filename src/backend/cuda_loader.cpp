// Finds the CUDA backend plugin (libturbospark_cuda.so) and creates backends through it. The
// plugin is looked for beside the executable (and one folder up, for the test binaries), then
// where TURBOSPARK_CUDA_PLUGIN points, then on the library path.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace ts {
namespace {

constexpr const char* kPluginName = "libturbospark_cuda.so";

struct Plugin {
  void* handle = nullptr;
  int (*device_count)() = nullptr;
  Backend* (*create)(int) = nullptr;
  std::string error;  // why it could not be loaded
};

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

Plugin load() {
  Plugin p;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TURBOSPARK_CUDA_PLUGIN")) candidates.emplace_back(env);
  const std::string dir = exe_dir();
  candidates.push_back(dir + "/" + kPluginName);
  candidates.push_back(dir + "/../" + kPluginName);
#ifdef TURBOSPARK_INSTALLED_PLUGIN_DIR
  // Where `cmake --install` and the package put it.
  candidates.push_back(dir + "/" TURBOSPARK_INSTALLED_PLUGIN_DIR "/" + kPluginName);
#endif
  candidates.emplace_back(kPluginName);
  for (const std::string& c : candidates) {
    p.handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p.handle != nullptr) break;
    p.error = ::dlerror();
  }
  if (p.handle == nullptr) return p;
  p.device_count = reinterpret_cast<int (*)()>(::dlsym(p.handle, "turbospark_cuda_device_count"));
  p.create = reinterpret_cast<Backend* (*)(int)>(::dlsym(p.handle, "turbospark_cuda_create"));
  if (p.device_count == nullptr || p.create == nullptr) {
    p.error = std::string(kPluginName) + " lacks its entry points";
    p.handle = nullptr;
  }
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load();
  return p;
}

}  // namespace

bool cuda_device_available() {
  const Plugin& p = plugin();
  return p.handle != nullptr && p.device_count() > 0;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  const Plugin& p = plugin();
  if (p.handle == nullptr)
    fail(ErrorKind::Usage, "--backend cuda: the CUDA backend is not available (" + p.error + ")");
  return std::unique_ptr<Backend>(p.create(device));
}

}  // namespace ts

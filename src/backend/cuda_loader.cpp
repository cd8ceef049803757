// Finds the CUDA backend plugin (libturbospark_cuda.so, backend/plugin_loader.h; or where
// TURBOSPARK_CUDA_PLUGIN points) and creates backends through it.
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/plugin_loader.h"
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

Plugin load() {
  Plugin p;
  std::vector<void*> entry;
  p.handle =
      open_plugin(kPluginName, "TURBOSPARK_CUDA_PLUGIN",
                  {"turbospark_cuda_device_count", "turbospark_cuda_create"}, &entry, &p.error);
  if (p.handle == nullptr) return p;
  p.device_count = reinterpret_cast<int (*)()>(entry[0]);
  p.create = reinterpret_cast<Backend* (*)(int)>(entry[1]);
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load();
  return p;
}

}  // namespace

bool cuda_device_available() {
  return cuda_device_count() > 0;
}

int cuda_device_count(std::string* why) {
  const Plugin& p = plugin();
  if (p.handle == nullptr && why != nullptr) *why = p.error;
  return p.handle != nullptr ? p.device_count() : 0;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  const Plugin& p = plugin();
  if (p.handle == nullptr)
    fail(ErrorKind::Usage, "--backend cuda: the CUDA backend is not available (" + p.error + ")");
  return std::unique_ptr<Backend>(p.create(device));
}

}  // namespace ts

#include <vector>

#include "backend/plugin_loader.h"
#include "core/error.h"
#include "parallel/nccl.h"

namespace ts {
namespace {

constexpr const char* kPluginName = "libturbospark_nccl.so";

struct Plugin {
  void* handle = nullptr;
  int (*version)() = nullptr;
  void (*unique_id)(char*) = nullptr;
  Communicator* (*create)(int, int, const char*, int, void*) = nullptr;
  std::string error;
};

Plugin load() {
  Plugin p;
  std::vector<void*> entry;
  p.handle = open_plugin(
      kPluginName, "TURBOSPARK_NCCL_PLUGIN",
      {"turbospark_nccl_version", "turbospark_nccl_unique_id", "turbospark_nccl_create"}, &entry,
      &p.error);
  if (p.handle == nullptr) return p;
  p.version = reinterpret_cast<int (*)()>(entry[0]);
  p.unique_id = reinterpret_cast<void (*)(char*)>(entry[1]);
  p.create = reinterpret_cast<Communicator* (*)(int, int, const char*, int, void*)>(entry[2]);
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load();
  return p;
}

const Plugin& loaded() {
  const Plugin& p = plugin();
  if (p.handle == nullptr) fail(ErrorKind::Usage, "NCCL is not available (" + p.error + ")");
  return p;
}

}  // namespace

int nccl_version(std::string* why) {
  const Plugin& p = plugin();
  if (p.handle == nullptr) {
    if (why != nullptr) *why = p.error;
    return 0;
  }
  return p.version();
}

NcclId nccl_unique_id() {
  NcclId id{};
  loaded().unique_id(id.data());
  return id;
}

std::unique_ptr<Communicator> make_nccl_communicator(int rank, int size, const NcclId& id,
                                                     int device, void* stream) {
  return std::unique_ptr<Communicator>(loaded().create(rank, size, id.data(), device, stream));
}

}  // namespace ts

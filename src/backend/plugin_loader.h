// Finds and opens a plugin module of this build (libturbospark_cuda.so, libturbospark_nccl.so):
// where `env_var` points, beside the executable (and one folder up, for the test binaries), where
// the install puts plugins, then on the library path.
#pragma once

#include <string>
#include <vector>

namespace ts {

// The dlopen() handle with the addresses of `symbols` in *resolved (in their order), or null with
// *error saying why the last candidate failed or which entry point the plugin lacks.
void* open_plugin(const char* file, const char* env_var, const std::vector<const char*>& symbols,
                  std::vector<void*>* resolved, std::string* error);

}  // namespace ts

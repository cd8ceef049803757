// Finds and opens a plugin module of this build (libturbospark_cuda.so, libturbospark_nccl.so):
// where `env_var` points, beside the executable (and one folder up, for the test binaries), where
// the install puts plugins, then on the library path.
#pragma once

#include <string>

namespace ts {

// The dlopen() handle, or null with *error saying why the last candidate failed.
void* open_plugin(const char* file, const char* env_var, std::string* error);

}  // namespace ts

// What the server tells about its model beyond its name, for routes that describe it (Ollama's
// /api/tags and /api/show). Filled by the serve command from the opened model.
#pragma once

#include <cstdint>
#include <string>

namespace ts::server {

struct ModelInfo {
  std::string family;           // the architecture's name ("llama", "mixtral", ...)
  std::string format;           // "gguf" or "safetensors"
  uint64_t size_bytes = 0;      // of the model's files
  int64_t modified_unix = 0;    // the model file's modification time
  int64_t trained_context = 0;  // the context the model was trained for (0: not known)
  int64_t slot_context = 0;     // each slot's context (-c)
};

}  // namespace ts::server

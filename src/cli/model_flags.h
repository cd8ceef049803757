// Flags shared by every command that runs a model (-m, -t, -c, --kv-type, --expert-slots, ...),
// and their translation into EngineOptions.
#pragma once

#include <string>

#include "runtime/engine.h"
#include "runtime/footprint.h"

namespace CLI {
class App;
}

namespace ts::cli {

struct ModelFlags {
  std::string model;
  int threads = 0;
  int64_t ctx = 4096;
  bool ctx_given = false;  // -c was on the command line
  std::string kv_type = "f16";
  int64_t prefill_batch = 0;  // 0: the backend's default
  int64_t expert_slots = 0;
  std::string memory_budget;
  std::string ram_budget;
  std::string cache_policy = "lru";
  bool expert_prefetch = false;
  std::string expert_io = "auto";
  int64_t state_checkpoints = kDefaultStateCheckpoints;
  std::string backend = "auto";
  int device = 0;
  int tensor_parallel = 1;
  int expert_parallel = 1;
  std::string dist_init;
};

// `default_model`: add "(default: the bundled model)" semantics when -m is absent.
void add_model_flags(CLI::App* app, ModelFlags& f, bool default_model);
EngineOptions engine_options(const ModelFlags& f);
// -m, or the bundled model when the command allows it; a usage error otherwise.
std::string model_path(const ModelFlags& f, bool default_model);
// Whether the model at `path` is an encoder (runtime/encoder.h runs it, not an Engine).
bool is_encoder_model(const std::string& path);
// A warning on stderr when -c (given, not the default) is above the context the model was trained
// on: positions past it are ones the model never saw, and its answers there may fall apart.
void warn_beyond_trained_context(const Engine& engine, const ModelFlags& f);
// "8G", "512M", "1000000" -> bytes.
uint64_t parse_bytes(const std::string& s, const std::string& flag);

}  // namespace ts::cli

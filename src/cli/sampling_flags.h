// Sampling and stopping flags shared by run and chat (llama.cpp's names and defaults).
#pragma once

#include <string>
#include <vector>

#include "runtime/generator.h"

namespace CLI {
class App;
}

namespace ts::cli {

struct SamplingFlags {
  SamplerParams params;
  int64_t seed = -1;  // -1: from the clock
  int64_t n_predict = -1;
  bool ignore_eos = false;
  bool json_object = false;
  std::string json_schema;       // inline JSON
  std::string json_schema_file;  // or a file holding it
  std::vector<std::string> stop;
  int64_t lookup = 0;
};

void add_sampling_flags(CLI::App* app, SamplingFlags& f);
GenerateOptions generate_options(const SamplingFlags& f);

}  // namespace ts::cli

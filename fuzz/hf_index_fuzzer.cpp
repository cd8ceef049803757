// libFuzzer target: HfDirectory::open of a directory whose model.safetensors.index.json is the
// input (config.json and two shards are fixed).
#include <cstddef>
#include <cstdint>

#include "parser_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ts::fuzz::HfScratchDir dir;
  dir.set_index(data, size);
  ts::fuzz::check_hf_dir(dir.dir());
  return 0;
}

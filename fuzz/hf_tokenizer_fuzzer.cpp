// libFuzzer target: Tokenizer::from_hf_dir of a directory whose tokenizer.json is the input.
#include <cstddef>
#include <cstdint>

#include "tokenizer_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ts::fuzz::ScratchDir dir;
  dir.write("tokenizer.json", data, size);
  ts::fuzz::check_tokenizer(dir.dir());
  return 0;
}

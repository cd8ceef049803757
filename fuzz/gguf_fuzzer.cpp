// libFuzzer target: GgufFile::open on arbitrary bytes, as a file of its own and as the first part
// of a split model (its split.* keys checked against a second part's).
#include <cstddef>
#include <cstdint>

#include "parser_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ts::fuzz::InputFile input;
  input.set(data, size);
  ts::fuzz::check_gguf(input.path());
  static ts::fuzz::SplitInput split;
  split.set(data, size);
  ts::fuzz::check_gguf(split.path());
  return 0;
}

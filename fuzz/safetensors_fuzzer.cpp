// libFuzzer target: SafetensorsFile::open on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "parser_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ts::fuzz::InputFile input;
  input.set(data, size);
  ts::fuzz::check_safetensors(input.path());
  return 0;
}

// libFuzzer target: open_model_spec (configuration, layer pattern, tensor index) on arbitrary
// GGUF bytes. Seeds: the fixtures' model files, the hybrid ones among them.
#include <cstddef>
#include <cstdint>

#include "model_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ts::fuzz::InputFile input;
  input.set(data, size);
  ts::fuzz::check_model(input.path());
  return 0;
}

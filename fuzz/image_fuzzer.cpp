// libFuzzer target: bytes through the image decoders and Qwen3-VL's processor.
#include <cstddef>
#include <cstdint>

#include "image_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_image(data, size);
  return 0;
}

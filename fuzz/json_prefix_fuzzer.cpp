// libFuzzer target: bytes through JSON mode's recognizer (JsonPrefix), against nlohmann's parser.
#include <cstddef>
#include <cstdint>

#include "json_prefix_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_json_prefix(data, size);
  return 0;
}

// libFuzzer target: model output through every tool-call format's parser and envelope.
#include <cstddef>
#include <cstdint>

#include "tool_calls_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_tool_calls(data, size);
  return 0;
}

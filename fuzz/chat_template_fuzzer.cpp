// libFuzzer target: a chat template through the Jinja parser and renderer.
#include <cstddef>
#include <cstdint>

#include "chat_template_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_chat_template(data, size);
  return 0;
}

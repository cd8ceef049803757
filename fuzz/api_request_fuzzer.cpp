// libFuzzer target: an OpenAI request body (the first byte picks the endpoint) through
// parse_api_request, as the server reads it.
#include <cstddef>
#include <cstdint>

#include "api_request_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_api_request(data, size);
  return 0;
}

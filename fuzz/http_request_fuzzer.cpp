// libFuzzer target: the bytes of an HTTP request through the connection gate's head check, then
// its body through the bounded JSON parse and parse_api_request, as the server reads them.
#include <cstddef>
#include <cstdint>

#include "http_request_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_http_request(data, size);
  return 0;
}

// libFuzzer target: a JSON schema and bytes through SchemaPrefix, against an independent validator.
#include <cstddef>
#include <cstdint>

#include "json_schema_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts::fuzz::check_json_schema(data, size);
  return 0;
}

// The rope-scaling references (tests/tools/make_rope_scaling_reference.py): fixture GGUFs with the
// converter's rope-scaling keys added, their prompts and transformers' logits, for the CPU tests
// (test_gguf_rope_scaling) and the CUDA ones (test_cuda_fixtures).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fixture_models.h"
#include "formats/gguf.h"

namespace ts::test {

using GgufKeys = std::vector<std::pair<std::string, GgufValue>>;

// A copy of the GGUF at `from` with `keys` added (after its own, which must not hold them), in
// the test's temporary folder as NAME.gguf.
std::string gguf_with_keys(const std::string& from, const GgufKeys& keys, const std::string& name);

// The repository's f32 GGUF of a fixture family.
std::string fixture_gguf(const std::string& family);

struct RopeScalingCase {
  std::string name;
  std::string plain_gguf;  // the fixture without the keys
  std::string gguf;        // with them
  std::vector<int32_t> ids;
  std::vector<float> ref;  // transformers' float32 logits [ids][vocab]
  LogitsRun run;           // micro-batch and context the prompt needs
  int64_t vocab() const { return static_cast<int64_t>(ref.size() / ids.size()); }
};

// gemma3 with linear factor 8 on its global layers (as Gemma 3 4B-27B GGUFs carry it).
RopeScalingCase gemma3_linear8();
// qwen3 with YaRN, factor 4 over an original context of 32, its prompt repeated to 96 tokens.
RopeScalingCase qwen3_yarn4();

}  // namespace ts::test

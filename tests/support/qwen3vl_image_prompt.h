// A Qwen3-VL fixture's image prompt (meta.json's "image"; qwen3_vl in the shared data,
// qwen3_vl_moe in the repository): the prompt ids with the placeholder tokens, transformers' 3-D
// positions, and the vision tower's stored outputs (the merged features and the DeepStack
// features) as an encoded image; shared by the CPU and the CUDA tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vision/image_rows.h"

namespace ts {
class Engine;
}

namespace ts::test {

struct Qwen3VlImagePrompt {
  std::vector<int32_t> ids;        // with the placeholder tokens
  std::vector<int32_t> positions;  // [n][3]: T, H, W
  EncodedImage image;
  int32_t image_token = 0;
  int64_t vision_end_row = 0;
};

// Read from the fixture's files (the caller skips first where they are absent).
Qwen3VlImagePrompt load_qwen3vl_image_prompt(const std::string& fixture);

// The prompt's logits [n][V] on `engine`: in one feed (cut by the engine's prefill batch), or
// through vision_end in one and then one token at a time (no positions given: the cache's rope
// shift continues them).
std::vector<float> image_prompt_logits(Engine& engine, const Qwen3VlImagePrompt& p, bool decode);

}  // namespace ts::test

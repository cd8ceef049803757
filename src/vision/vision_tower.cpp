#include "vision/vision_tower.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/model_source.h"
#include "vision/gemma3_vision.h"
#include "vision/gemma4_vision.h"
#include "vision/qwen3vl_vision.h"
#include "vision/tower_checks.h"

namespace ts {

std::unique_ptr<VisionTower> open_vision_tower(const std::string& path, int threads) {
  // The projector type of an mmproj GGUF, the model type of an HF directory.
  std::string type;
  {
    const auto source = ModelSource::open(path);
    if (source->gguf() != nullptr) {
      type = mmproj_projector_type(*source->gguf());
    } else {
      const auto& c = source->hf()->config();
      if (c.is_object()) type = c.value("model_type", "");
    }
  }
  if (type == "gemma3") return Gemma3Vision::open(path, threads);
  if (type == "gemma4" || type == "gemma4v") return Gemma4Vision::open(path, threads);
  return Qwen3VLVision::open(path, threads);
}

void VisionTower::set_max_tokens(int64_t) {
  fail(ErrorKind::Usage,
       path() + ": " + name() + " vision tower sizes images by pixels, not by a token bound");
}

ImageLayout image_layout(const VisionTower& tower, const ArchConfig& text) {
  const ImageLayout own = tower.layout();
  return own == ImageLayout::Bidirectional && text.image_attention == ImageAttention::None
             ? ImageLayout::Causal
             : own;
}

uint64_t image_key(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace ts

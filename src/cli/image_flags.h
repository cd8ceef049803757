// Images on the command line (`--image FILE`, several allowed; `--mmproj FILE`): the vision tower
// opened from the mmproj GGUF or from the model's own HF directory, each image encoded, and the
// placeholder tokens a prompt holds for them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "vision/image_rows.h"

namespace CLI {
class App;
}

namespace ts {
class Tokenizer;
class VisionTower;
}  // namespace ts

namespace ts::cli {

struct ImageFlags {
  std::string mmproj;
  std::vector<std::string> images;
  int64_t image_token = -1;  // -1: from the HF config or the vocabulary's <|image_pad|>
  int64_t min_pixels = 0, max_pixels = 0;  // 0: the processor's own
  int64_t max_tokens = 0;                  // 0: the processor's own
};

// `files`: the command takes --image FILE (run, logits); the server takes images in requests.
void add_image_flags(CLI::App* app, ImageFlags& f, bool files = true);

// The model's image placeholder ids: image (repeated per token), the markers around an image,
// and the processor's text on each side of the block (Gemma 3's "\n\n"), tokenized.
struct ImageTokens {
  int32_t image = -1, start = -1, end = -1;
  std::vector<int32_t> margin;
};

// An --image file's bytes (a usage error naming it when it cannot be read).
std::vector<uint8_t> read_image_file(const std::string& path);

// The command line's images, encoded, and how the model takes them.
struct CommandImages {
  std::vector<EncodedImage> encoded;
  ImageLayout layout = ImageLayout::MRope;
  std::string margin;  // VisionTower::block_margin()
};

// The model's vision tower: --mmproj, or the model's own HF directory when it has one; null when
// neither (`required`: a usage error then). Errors name the file: a model without a vision path,
// an mmproj whose width or DeepStack layers do not match it, a tower of another family, or one
// not yet verified on the engine's backend.
std::shared_ptr<VisionTower> open_vision(const ImageFlags& f, Engine& engine,
                                         const std::string& model_path, int threads, bool required);
// The encoded images of the command line, in order (none without --image). Errors name the file:
// a model without a vision path, an mmproj whose width or DeepStack layers do not match it.
CommandImages encode_images(const ImageFlags& f, Engine& engine, const std::string& model_path,
                            int threads);
// Placeholder ids from --image-token, the HF config (Qwen3-VL's or Gemma 3's keys), or the
// vocabulary (a usage error naming what to give when none is found); `margin` tokenized by tok.
ImageTokens image_tokens(const ImageFlags& f, const std::string& model_path, const Tokenizer* tok,
                         const std::string& margin);
// `prompt` with each image's block (margin, start, image x tokens, end, margin) put before the
// text, after BOS.
std::vector<int32_t> with_image_blocks(const std::vector<int32_t>& prompt, bool has_bos,
                                       const std::vector<EncodedImage>& images,
                                       const ImageTokens& t);

}  // namespace ts::cli

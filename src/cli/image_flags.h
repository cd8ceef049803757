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
class Qwen3VLVision;
class Tokenizer;
}  // namespace ts

namespace ts::cli {

struct ImageFlags {
  std::string mmproj;
  std::vector<std::string> images;
  int64_t image_token = -1;  // -1: from the HF config or the vocabulary's <|image_pad|>
  int64_t min_pixels = 0, max_pixels = 0;  // 0: the processor's own
};

// `files`: the command takes --image FILE (run, logits); the server takes images in requests.
void add_image_flags(CLI::App* app, ImageFlags& f, bool files = true);

// The model's image placeholder ids: image (repeated per token), and the markers around an image.
struct ImageTokens {
  int32_t image = -1, start = -1, end = -1;
};

// The model's vision tower: --mmproj, or the model's own HF directory when it has one; null when
// neither (`required`: a usage error then). Errors name the file: a model without a vision path,
// an mmproj whose width or DeepStack layers do not match it.
std::shared_ptr<Qwen3VLVision> open_vision(const ImageFlags& f, const Engine& engine,
                                           const std::string& model_path, int threads,
                                           bool required);
// The encoded images of the command line, in order (none without --image). Errors name the file:
// a model without a vision path, an mmproj whose width or DeepStack layers do not match it.
std::vector<EncodedImage> encode_images(const ImageFlags& f, const Engine& engine,
                                        const std::string& model_path, int threads);
// Placeholder ids from --image-token, the HF config, or the vocabulary (a usage error naming
// what to give when none is found).
ImageTokens image_tokens(const ImageFlags& f, const std::string& model_path, const Tokenizer* tok);
// `prompt` with each image's block (start, image x tokens, end) put before the text, after BOS.
std::vector<int32_t> with_image_blocks(const std::vector<int32_t>& prompt, bool has_bos,
                                       const std::vector<EncodedImage>& images,
                                       const ImageTokens& t);

}  // namespace ts::cli

// A chat prompt with images: the rendered text, whose image_url parts are markers
// (kImageMarker), tokenized around them, each marker replaced by the model's image block (vision
// start, one placeholder per merged image token, vision end), and the images' rows.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vision/image_rows.h"

namespace ts {
class Tokenizer;
class VisionTower;
}  // namespace ts

namespace ts::server {

// What the server needs to take images: the tower (one encode at a time) and the model's ids.
struct VisionService {
  std::shared_ptr<VisionTower> tower;
  std::mutex mu;
  int32_t image = -1, start = -1, end = -1;
  int64_t width = 0, n_deepstack = 0;
  ImageLayout layout = ImageLayout::MRope;
  std::string margin;       // the tower's block_margin()
  bool allow_urls = false;  // --allow-image-urls: http(s) image URLs are fetched
  size_t max_url_bytes = 0;
};

struct ImagePrompt {
  std::vector<int32_t> ids;
  std::shared_ptr<const ImageRows> rows;
  int64_t first_image_row = -1;
};

// The ids of `text` with its i-th marker replaced by encoded[i]'s block (start, its placeholders,
// end), text tokenized around them with special tokens parsed, `margin` joined to the text on
// each side of a block (as Gemma 3's processor puts "\n\n" there before tokenizing);
// *first_image_row (if given): the first placeholder row, -1 without images. An Input error when
// the counts differ.
std::vector<int32_t> image_block_ids(const std::string& text,
                                     const std::vector<EncodedImage>& encoded, const Tokenizer& tok,
                                     bool bos, int32_t image, int32_t start, int32_t end,
                                     const std::string& margin, int64_t* first_image_row = nullptr);

// Errors (ErrorKind::Input) name the image: a model without vision, a marker count that does not
// match, an image that does not decode.
// `urls[i]` non-empty: image i is fetched from it (only where vision->allow_urls).
ImagePrompt image_prompt(const std::string& text, const std::vector<std::string>& images,
                         const std::vector<std::string>& urls, const Tokenizer& tok, bool bos,
                         VisionService* vision);

}  // namespace ts::server

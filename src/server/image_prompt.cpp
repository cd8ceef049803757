#include "server/image_prompt.h"

#include "core/error.h"
#include "server/image_fetch.h"
#include "server/image_parts.h"
#include "text/tokenizer.h"
#include "vision/vision_tower.h"

namespace ts::server {

std::vector<int32_t> image_block_ids(const std::string& text,
                                     const std::vector<EncodedImage>& encoded, const Tokenizer& tok,
                                     bool bos, int32_t image, int32_t start, int32_t end,
                                     const std::string& margin, int64_t* first_image_row) {
  std::vector<std::string> pieces;
  for (size_t at = 0;;) {
    const size_t next = text.find(kImageMarker, at);
    pieces.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + kImageMarker.size();
  }
  if (pieces.size() != encoded.size() + 1)
    fail(ErrorKind::Input, std::to_string(encoded.size()) + " image(s) but " +
                               std::to_string(pieces.size() - 1) +
                               " image places in the rendered prompt");
  for (size_t i = 0; i < encoded.size(); ++i) {
    pieces[i] += margin;
    pieces[i + 1].insert(0, margin);
  }
  std::vector<int32_t> ids;
  if (first_image_row != nullptr) *first_image_row = -1;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::vector<int32_t> part = tok.encode(pieces[i], bos && i == 0, true);
    ids.insert(ids.end(), part.begin(), part.end());
    if (i == encoded.size()) break;
    ids.push_back(start);
    if (first_image_row != nullptr && *first_image_row < 0)
      *first_image_row = static_cast<int64_t>(ids.size());
    ids.insert(ids.end(), static_cast<size_t>(encoded[i].tokens()), image);
    ids.push_back(end);
  }
  return ids;
}

ImagePrompt image_prompt(const std::string& text, const std::vector<std::string>& images,
                         const std::vector<std::string>& urls, const Tokenizer& tok, bool bos,
                         VisionService* vision) {
  if (vision == nullptr || !vision->tower)
    fail(ErrorKind::Input,
         "this model takes no images (a vision model serves them: its HF directory, or a GGUF with "
         "--mmproj FILE)");
  std::vector<EncodedImage> encoded;
  for (size_t i = 0; i < images.size(); ++i) {
    std::string fetched;
    if (i < urls.size() && !urls[i].empty()) {
      if (!vision->allow_urls)
        fail(ErrorKind::Input, "image " + std::to_string(i + 1) +
                                   ": this server does not fetch image URLs (it was not started "
                                   "with --allow-image-urls): send the image inline as a data: "
                                   "URL (data:image/png;base64,...)");
      fetched = fetch_image_url(urls[i], vision->max_url_bytes);
    }
    const std::string& bytes = fetched.empty() ? images[i] : fetched;
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    try {
      std::lock_guard lock(vision->mu);
      encoded.push_back(vision->tower->encode_file(data, bytes.size()));
    } catch (const Error& e) {
      fail(ErrorKind::Input, "image " + std::to_string(i + 1) + ": " + e.what());
    }
  }
  ImagePrompt out;
  out.ids = image_block_ids(text, encoded, tok, bos, vision->image, vision->start, vision->end,
                            vision->margin, &out.first_image_row);
  out.rows = std::make_shared<const ImageRows>(out.ids, vision->image, encoded, vision->width,
                                               vision->n_deepstack, vision->layout);
  return out;
}

}  // namespace ts::server

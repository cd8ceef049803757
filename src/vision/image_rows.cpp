#include "vision/image_rows.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ts {

ImageRows::ImageRows(const std::vector<int32_t>& ids, int32_t image_token,
                     const std::vector<EncodedImage>& images, int64_t width, int64_t n_deepstack,
                     ImageLayout layout)
    : layout_(layout) {
  const size_t n = ids.size();
  rope_pos_.resize(3 * n);
  span_.assign(n, 0);
  embeds_.assign(n, nullptr);
  deepstack_rows_.assign(n, nullptr);
  keys_.assign(n, 0);
  int64_t image_rows = 0;
  for (const EncodedImage& im : images) {
    if (im.grid_h <= 0 || im.grid_w <= 0 ||
        static_cast<int64_t>(im.embeds.size()) != im.tokens() * width ||
        static_cast<int64_t>(im.deepstack.size()) != n_deepstack * im.tokens() * width)
      fail(ErrorKind::Input,
           "an encoded image's features do not match its grid and the model's "
           "width " +
               std::to_string(width));
    image_rows += im.tokens();
  }
  deepstack_.resize(static_cast<size_t>(image_rows * n_deepstack * width));
  embed_data_.resize(static_cast<size_t>(image_rows * width));
  size_t next_image = 0;
  int64_t next_pos = 0, ds_row = 0;
  for (size_t i = 0; i < n;) {
    if (ids[i] != image_token) {
      for (int s = 0; s < 3; ++s) rope_pos_[3 * i + s] = static_cast<int32_t>(next_pos);
      ++next_pos;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < n && ids[end] == image_token) ++end;
    if (next_image == images.size())
      fail(ErrorKind::Input, "the prompt has more image placeholder runs than the " +
                                 std::to_string(images.size()) + " image(s) given");
    const EncodedImage& im = images[next_image++];
    if (static_cast<int64_t>(end - i) != im.tokens())
      fail(ErrorKind::Input, "image " + std::to_string(next_image) + " has " +
                                 std::to_string(im.tokens()) + " tokens but the prompt holds " +
                                 std::to_string(end - i) + " placeholders for it");
    const int64_t start = next_pos;
    for (int64_t t = 0; t < im.tokens(); ++t) {
      const size_t r = i + static_cast<size_t>(t);
      rope_pos_[3 * r] = static_cast<int32_t>(start);
      rope_pos_[3 * r + 1] = static_cast<int32_t>(start + t / im.grid_w);
      rope_pos_[3 * r + 2] = static_cast<int32_t>(start + t % im.grid_w);
      span_[r] = static_cast<int32_t>(im.tokens() - 1 - t);
      float* e = embed_data_.data() + ds_row * width;
      std::copy_n(im.embeds.data() + t * width, width, e);
      embeds_[r] = e;
      // Never 0 (a text row): the image's key and the row's place in it, mixed.
      keys_[r] = (im.key ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(t + 1))) | 1;
      if (n_deepstack > 0) {
        float* dst = deepstack_.data() + ds_row * n_deepstack * width;
        for (int64_t k = 0; k < n_deepstack; ++k)
          std::copy_n(im.deepstack.data() + (k * im.tokens() + t) * width, width, dst + k * width);
        deepstack_rows_[r] = dst;
      }
      ++ds_row;
    }
    next_pos = start + std::max(im.grid_h, im.grid_w);
    i = end;
  }
  if (next_image != images.size())
    fail(ErrorKind::Input, std::to_string(images.size()) + " image(s) given but the prompt has " +
                               std::to_string(next_image) + " placeholder run(s)");
}

RowInputs ImageRows::inputs() const {
  const bool mrope = layout_ == ImageLayout::MRope;
  return {mrope ? rope_pos_.data() : nullptr, embeds_.data(),
          deepstack_.empty() ? nullptr : deepstack_rows_.data(),
          layout_ == ImageLayout::Bidirectional ? span_.data() : nullptr};
}

}  // namespace ts

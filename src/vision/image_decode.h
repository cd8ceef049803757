// Image files to RGB bytes, by Debian's libraries (libpng, libjpeg-turbo, libwebp), the format
// told by the file's signature. Transparency is composited onto white with PIL's integer
// arithmetic, as transformers' convert_to_rgb does before a processor sees the image. The pixel
// count is checked from the header before anything is decoded (decompression bombs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ts {

// PIL's own bomb limit is 89.5 Mpixels; a vision prompt has no use for more than this.
constexpr int64_t kMaxImagePixels = int64_t{64} << 20;

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
};

// Errors (ErrorKind::Input) name the format and what is wrong: "image: truncated PNG data", ...
RgbImage decode_image(const uint8_t* data, size_t size, int64_t max_pixels = kMaxImagePixels);

// One pixel of RGBA over opaque white, as PIL.Image.alpha_composite computes it.
void composite_on_white(const uint8_t rgba[4], uint8_t rgb[3]);

}  // namespace ts

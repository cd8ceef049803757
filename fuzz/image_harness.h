// What one image fuzz input checks: the bytes through the decoders (PNG, JPEG, WebP by signature)
// and, when they decode, Qwen3-VL's processor. Shared by the libFuzzer target and the replay
// test. Anything but a one-line ts::Error or a well-formed result is a bug: a crash, a buffer of
// the wrong size, a value that is not finite.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"

namespace ts::fuzz {

inline void check_image(const uint8_t* data, size_t size) {
  RgbImage im;
  try {
    // A low pixel limit keeps each input fast; the limit's own check is part of what runs.
    im = decode_image(data, size, int64_t{1} << 20);
  } catch (const Error&) {
    return;
  }
  if (im.width <= 0 || im.height <= 0 || im.width * im.height > (int64_t{1} << 20) ||
      static_cast<int64_t>(im.rgb.size()) != im.width * im.height * 3)
    std::abort();
  ProcessorConfig p;
  p.min_pixels = 1024;
  p.max_pixels = 65536;
  try {
    const ImagePatches out = preprocess_image(im, p);
    const int64_t per = 3 * p.temporal * p.patch * p.patch;
    if (out.grid_h <= 0 || out.grid_w <= 0 || out.grid_h % p.merge != 0 ||
        out.grid_w % p.merge != 0 ||
        static_cast<int64_t>(out.values.size()) != out.grid_h * out.grid_w * per)
      std::abort();
    for (float v : out.values)
      if (!std::isfinite(v) || v < -1.0001f || v > 1.0001f) std::abort();
  } catch (const Error&) {
  }
}

}  // namespace ts::fuzz

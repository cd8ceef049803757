// Image processors: Gemma 3's (square_planes, below), Gemma 4's (gemma4_patches, below) and
// Qwen2-VL / Qwen3-VL's (transformers' Qwen2VLImageProcessorPil): the size chosen by smart_resize
// (multiples of patch x merge, the pixel count within [min, max]), PIL's bicubic resampling of the
// 8-bit image, rescale and normalisation, and the patch order the tower reads (each merge window's
// patches together, each patch's values as channel, frame, row, column, the image repeated over the
// temporal frames).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vision/image_decode.h"

namespace ts {

struct ProcessorConfig {
  int64_t patch = 16;
  int64_t merge = 2;
  int64_t temporal = 2;
  int64_t min_pixels = 65536;     // Qwen3-VL's preprocessor_config.json: size.shortest_edge
  int64_t max_pixels = 16777216;  // size.longest_edge
  double rescale = 1.0 / 255.0;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
};

// transformers' smart_resize: {height, width}. Errors (ErrorKind::Input) for an aspect ratio
// over 200.
std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor,
                                    int64_t min_pixels, int64_t max_pixels);

enum class Resample { Bilinear, Bicubic };

// PIL's Image.resize(..., BILINEAR / BICUBIC) of an 8-bit RGB image (its fixed-point two-pass
// resampler).
RgbImage resize_pil(const RgbImage& in, int64_t width, int64_t height, Resample filter);

// Per channel, each 8-bit value's (v * rescale - mean) / std as transformers computes it.
std::array<std::array<float, 256>, 3> normalisation_table(double rescale,
                                                          const std::array<float, 3>& mean,
                                                          const std::array<float, 3>& std);

// Gemma 3's processor (transformers' Gemma3ImageProcessorPil, no pan and scan): PIL's bilinear
// resize to size x size, rescale and normalisation: [3][size][size].
std::vector<float> square_planes(const RgbImage& image, int64_t size, double rescale,
                                 const std::array<float, 3>& mean, const std::array<float, 3>& std);

struct ImagePatches {
  int64_t grid_h = 0, grid_w = 0;  // in patches
  std::vector<float> values;       // [grid_h * grid_w][3 * temporal * patch * patch]
};

ImagePatches preprocess_image(const RgbImage& image, const ProcessorConfig& p);

// Gemma 4's processor size (transformers' get_aspect_ratio_preserving_size): the largest
// {height, width} of the image's aspect ratio with at most max_patches patches, each side a
// multiple of patch x pool. Errors (ErrorKind::Input): an image that gives no such size.
std::array<int64_t, 2> gemma4_size(int64_t height, int64_t width, int64_t patch,
                                   int64_t max_patches, int64_t pool);

// Gemma 4's processor (transformers' Gemma4ImageProcessorPil): the image resized to gemma4_size
// (max_soft_tokens x pool x pool patches at most) by PIL's bicubic resampling, rescaled (no
// normalisation: values in [0, 1]), its patches in row-major grid order, each patch's values as
// row, column, channel (3 x patch x patch of them; temporal is 1).
ImagePatches gemma4_patches(const RgbImage& image, int64_t patch, int64_t pool,
                            int64_t max_soft_tokens, double rescale);

}  // namespace ts

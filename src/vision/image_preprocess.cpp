#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ts {
namespace {

// PIL's bilinear (triangle) and bicubic (a = -0.5) kernels and its coefficient tables
// (Resample.c: precompute_coeffs, normalize_coeffs_8bpc), 22 fractional bits.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinear(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

struct Coeffs {
  int64_t ksize = 0;
  std::vector<int64_t> bounds;  // per output: first input, count
  std::vector<int32_t> k;       // [out][ksize]
};

Coeffs precompute(int64_t in_size, int64_t out_size, Resample filter) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const bool cubic = filter == Resample::Bicubic;
  const double support = (cubic ? 2.0 : 1.0) * filterscale;
  Coeffs c;
  c.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(2 * out_size));
  c.k.assign(static_cast<size_t>(out_size * c.ksize), 0);
  std::vector<double> kk(static_cast<size_t>(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double t = (static_cast<double>(x + xmin) - center + 0.5) * ss;
      const double w = cubic ? bicubic(t) : bilinear(t);
      kk[static_cast<size_t>(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double v = kk[static_cast<size_t>(x)];
      if (ww != 0.0) v /= ww;
      c.k[static_cast<size_t>(xx * c.ksize + x)] = static_cast<int32_t>(
          v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.bounds[static_cast<size_t>(2 * xx)] = xmin;
    c.bounds[static_cast<size_t>(2 * xx + 1)] = xmax;
  }
  return c;
}

uint8_t clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;
  return static_cast<uint8_t>(std::clamp(s, 0, 255));
}

// One pass along x (horizontal) or y of the fixed-point resampler, rows [y0, y0 + rows) of `in`.
RgbImage pass(const RgbImage& in, const Coeffs& c, bool horizontal, int64_t out_len, int64_t y0,
              int64_t rows) {
  RgbImage out;
  out.width = horizontal ? out_len : in.width;
  out.height = horizontal ? rows : out_len;
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const int64_t first = c.bounds[static_cast<size_t>(2 * o)];
      const int64_t n = c.bounds[static_cast<size_t>(2 * o + 1)];
      const int32_t* k = c.k.data() + o * c.ksize;
      for (int ch = 0; ch < 3; ++ch) {
        int32_t ss = 1 << (kPrecisionBits - 1);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t sx = horizontal ? first + i : x, sy = horizontal ? y0 + y : first + i;
          ss += static_cast<int32_t>(in.rgb[static_cast<size_t>((sy * in.width + sx) * 3 + ch)]) *
                k[i];
        }
        out.rgb[static_cast<size_t>((y * out.width + x) * 3 + ch)] = clip8(ss);
      }
    }
  return out;
}

}  // namespace

std::array<std::array<float, 256>, 3> normalisation_table(double rescale,
                                                          const std::array<float, 3>& mean,
                                                          const std::array<float, 3>& std) {
  // transformers: float64 product with the rescale factor to float32, then (x - mean) / std in
  // float32.
  std::array<std::array<float, 256>, 3> lut;
  for (size_t c = 0; c < 3; ++c)
    for (size_t v = 0; v < 256; ++v)
      lut[c][v] = (static_cast<float>(static_cast<double>(v) * rescale) - mean[c]) / std[c];
  return lut;
}

std::vector<float> square_planes(const RgbImage& image, int64_t size, double rescale,
                                 const std::array<float, 3>& mean,
                                 const std::array<float, 3>& std) {
  const RgbImage r = resize_pil(image, size, size, Resample::Bilinear);
  const auto lut = normalisation_table(rescale, mean, std);
  std::vector<float> out(static_cast<size_t>(3 * size * size));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < size * size; ++i)
      out[static_cast<size_t>(c * size * size + i)] =
          lut[static_cast<size_t>(c)][r.rgb[static_cast<size_t>(i * 3 + c)]];
  return out;
}

std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor,
                                    int64_t min_pixels, int64_t max_pixels) {
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  if (std::max(h, w) / std::min(h, w) > 200)
    fail(ErrorKind::Input,
         "image: aspect ratio " + std::to_string(std::max(h, w) / std::min(h, w)) + " is over 200");
  const double f = static_cast<double>(factor);
  // Python's round() rounds halves to even, as nearbyint does in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

RgbImage resize_pil(const RgbImage& in, int64_t width, int64_t height, Resample filter) {
  if (width == in.width && height == in.height) return in;
  const Coeffs ch = precompute(in.width, width, filter), cv = precompute(in.height, height, filter);
  // Two passes, each rounding to 8 bits; a pass whose size does not change is skipped. Pillow 13
  // runs the vertical pass first when the height shrinks by more than twice as many pixels as
  // the width (earlier Pillows always ran the horizontal one first: their results differ there).
  const int64_t dh = in.height - height, dw = in.width - width;
  const bool horizontal_first = !(dh > 0 && dh > 2 * dw);
  if (!horizontal_first) {
    RgbImage cur = height != in.height ? pass(in, cv, false, height, 0, in.height) : in;
    return width != in.width ? pass(cur, ch, true, width, 0, cur.height) : cur;
  }
  // The horizontal pass runs over the rows the vertical one reads (PIL's ybox).
  RgbImage cur = in;
  Coeffs shifted = cv;
  if (width != in.width) {
    const int64_t first = cv.bounds[0], last = cv.bounds[static_cast<size_t>(2 * height - 2)] +
                                               cv.bounds[static_cast<size_t>(2 * height - 1)];
    cur = pass(in, ch, true, width, first, last - first);
    for (int64_t i = 0; i < height; ++i) shifted.bounds[static_cast<size_t>(2 * i)] -= first;
  }
  if (height != in.height) cur = pass(cur, shifted, false, height, 0, cur.height);
  return cur;
}

ImagePatches preprocess_image(const RgbImage& image, const ProcessorConfig& p) {
  const int64_t factor = p.patch * p.merge;
  const auto [h, w] = smart_resize(image.height, image.width, factor, p.min_pixels, p.max_pixels);
  if (h <= 0 || w <= 0 || h > 65536 || w > 65536 || h * w > kMaxImagePixels)
    fail(ErrorKind::Input, "image: resized to " + std::to_string(w) + " x " + std::to_string(h) +
                               ", outside what the processor takes");
  const RgbImage r = resize_pil(image, w, h, Resample::Bicubic);
  ImagePatches out;
  out.grid_h = h / p.patch;
  out.grid_w = w / p.patch;
  const int64_t P = p.patch, T = p.temporal, m = p.merge, per = 3 * T * P * P;
  out.values.resize(static_cast<size_t>(out.grid_h * out.grid_w * per));
  const auto lut = normalisation_table(p.rescale, p.mean, p.std);
  const int64_t bw = out.grid_w / m;
  for (int64_t idx = 0; idx < out.grid_h * out.grid_w; ++idx) {
    const int64_t ix = idx % m, iy = (idx / m) % m, block = idx / (m * m);
    const int64_t py = (block / bw) * m + iy, px = (block % bw) * m + ix;
    float* dst = out.values.data() + idx * per;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x) {
            const uint8_t v = r.rgb[static_cast<size_t>(((py * P + y) * w + px * P + x) * 3 + c)];
            dst[((c * T + t) * P + y) * P + x] =
                lut[static_cast<size_t>(c)][static_cast<size_t>(v)];
          }
  }
  return out;
}

std::array<int64_t, 2> gemma4_size(int64_t height, int64_t width, int64_t patch,
                                   int64_t max_patches, int64_t pool) {
  const double target = static_cast<double>(max_patches * patch * patch);
  const double factor = std::sqrt(target / static_cast<double>(height * width));
  const int64_t side = pool * patch;
  const auto down = [&](double x) {
    return static_cast<int64_t>(std::floor(x / static_cast<double>(side))) * side;
  };
  int64_t h = down(factor * static_cast<double>(height));
  int64_t w = down(factor * static_cast<double>(width));
  if (h == 0 && w == 0) fail(ErrorKind::Input, "image: resized to 0 x 0 (Gemma 4's processor)");
  // A side that rounds to nothing takes one unit, the other its aspect ratio in units (capped).
  const int64_t longest = max_patches / (pool * pool) * side;
  if (h == 0) {
    h = side;
    w = std::min(width / height * side, longest);
  } else if (w == 0) {
    w = side;
    h = std::min(height / width * side, longest);
  }
  if (static_cast<double>(h * w) > target)
    fail(ErrorKind::Input, "image: " + std::to_string(width) + " x " + std::to_string(height) +
                               " resizes past " + std::to_string(max_patches) + " patches");
  return {h, w};
}

ImagePatches gemma4_patches(const RgbImage& image, int64_t patch, int64_t pool,
                            int64_t max_soft_tokens, double rescale) {
  const auto [h, w] =
      gemma4_size(image.height, image.width, patch, max_soft_tokens * pool * pool, pool);
  const RgbImage r = resize_pil(image, w, h, Resample::Bicubic);
  ImagePatches out;
  out.grid_h = h / patch;
  out.grid_w = w / patch;
  const int64_t per = 3 * patch * patch;
  out.values.resize(static_cast<size_t>(out.grid_h * out.grid_w * per));
  std::array<float, 256> lut;
  for (size_t v = 0; v < 256; ++v) lut[v] = static_cast<float>(static_cast<double>(v) * rescale);
  for (int64_t py = 0; py < out.grid_h; ++py)
    for (int64_t px = 0; px < out.grid_w; ++px) {
      float* dst = out.values.data() + (py * out.grid_w + px) * per;
      for (int64_t y = 0; y < patch; ++y) {
        const uint8_t* src = r.rgb.data() + ((py * patch + y) * w + px * patch) * 3;
        for (int64_t i = 0; i < patch * 3; ++i) dst[y * patch * 3 + i] = lut[src[i]];
      }
    }
  return out;
}

}  // namespace ts

#include "vision/image_decode.h"

// jpeglib.h uses FILE without including its header.
#include <cstdio>
// (separate block: kept before jpeglib.h)
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

#include <csetjmp>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"

namespace ts {
namespace {

[[noreturn]] void bad(const std::string& what) {
  fail(ErrorKind::Input, "image: " + what);
}

void check_size(int64_t w, int64_t h, int64_t max_pixels, const char* format) {
  if (w <= 0 || h <= 0) bad(std::string(format) + " of zero size");
  if (w > max_pixels / h)
    bad(std::string(format) + " of " + std::to_string(w) + " x " + std::to_string(h) +
        " pixels is over the limit of " + std::to_string(max_pixels) + " pixels");
}

RgbImage from_rgba(int64_t w, int64_t h, const uint8_t* rgba) {
  RgbImage out{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int64_t i = 0; i < w * h; ++i) composite_on_white(rgba + 4 * i, out.rgb.data() + 3 * i);
  return out;
}

// --- PNG ---
struct PngReader {
  const uint8_t* data;
  size_t size, at;
};

void png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->size - r->at) png_error(png, "truncated PNG data");
  std::memcpy(out, r->data + r->at, n);
  r->at += n;
}

void png_fail(png_structp png, png_const_charp msg) {
  auto* err = static_cast<std::string*>(png_get_error_ptr(png));
  *err = msg;
  png_longjmp(png, 1);
}
void png_warn(png_structp, png_const_charp) {}

// What a decode fills in, on the heap: locals changed between setjmp and a longjmp would be
// indeterminate.
struct Decoded {
  int64_t w = 0, h = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
};

RgbImage finish(Decoded& d) {
  if (d.channels == 4) return from_rgba(d.w, d.h, d.pixels.data());
  return {d.w, d.h, std::move(d.pixels)};
}

RgbImage decode_png(const uint8_t* data, size_t size, int64_t max_pixels) {
  std::string err;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_fail, png_warn);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) bad("out of memory opening a PNG");
  PngReader reader{data, size, 0};
  const auto d = std::make_unique<Decoded>();
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    bad("bad PNG data: " + err);
  }
  png_set_read_fn(png, &reader, png_read);
  png_read_info(png, info);
  d->w = static_cast<int64_t>(png_get_image_width(png, info));
  d->h = static_cast<int64_t>(png_get_image_height(png, info));
  if (d->w <= 0 || d->h <= 0 || d->w > max_pixels / d->h) {
    png_destroy_read_struct(&png, &info, nullptr);
    check_size(d->w, d->h, max_pixels, "PNG");
  }
  const int type = png_get_color_type(png, info);
  // 16-bit samples keep their high byte, as PIL's PNG reader does.
  png_set_strip_16(png);
  png_set_packing(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  d->channels = png_get_channels(png, info);
  if (d->channels != 3 && d->channels != 4) {
    png_destroy_read_struct(&png, &info, nullptr);
    bad("PNG with " + std::to_string(d->channels) + " channels after expansion");
  }
  d->pixels.resize(static_cast<size_t>(d->w * d->h * d->channels));
  d->rows.resize(static_cast<size_t>(d->h));
  for (int64_t y = 0; y < d->h; ++y)
    d->rows[static_cast<size_t>(y)] = d->pixels.data() + y * d->w * d->channels;
  png_read_image(png, d->rows.data());
  png_destroy_read_struct(&png, &info, nullptr);
  return finish(*d);
}

// --- JPEG ---
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  e->mgr.format_message(cinfo, e->message);
  std::longjmp(e->jump, 1);
}
// Warnings (a truncated stream, a corrupt marker) are counted, not printed: any refuses the image,
// as PIL refuses a truncated file.
void jpeg_quiet(j_common_ptr cinfo, int level) {
  if (level < 0) ++cinfo->err->num_warnings;
}

RgbImage decode_jpeg(const uint8_t* data, size_t size, int64_t max_pixels) {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_quiet;
  const auto d = std::make_unique<Decoded>();
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    bad(std::string("bad JPEG data: ") + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  d->w = static_cast<int64_t>(cinfo.image_width);
  d->h = static_cast<int64_t>(cinfo.image_height);
  if (d->w <= 0 || d->h <= 0 || d->w > max_pixels / d->h) {
    jpeg_destroy_decompress(&cinfo);
    check_size(d->w, d->h, max_pixels, "JPEG");
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    bad("CMYK JPEG is not supported");
  }
  // libjpeg's defaults (slow integer DCT, fancy upsampling) are what PIL decodes with; grey
  // becomes RGB by repeating the sample, as PIL's convert("RGB") does.
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  d->pixels.resize(static_cast<size_t>(d->w * d->h * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = d->pixels.data() + static_cast<size_t>(cinfo.output_scanline) * d->w * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  const long warnings = err.mgr.num_warnings;
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0) bad("truncated or corrupt JPEG data");
  return finish(*d);
}

// --- WebP ---
RgbImage decode_webp(const uint8_t* data, size_t size, int64_t max_pixels) {
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(data, size, &f) != VP8_STATUS_OK) bad("bad or truncated WebP data");
  check_size(f.width, f.height, max_pixels, "WebP");
  if (f.has_animation) bad("animated WebP is not supported");
  int w = 0, h = 0;
  uint8_t* px =
      f.has_alpha ? WebPDecodeRGBA(data, size, &w, &h) : WebPDecodeRGB(data, size, &w, &h);
  if (px == nullptr) bad("bad or truncated WebP data");
  RgbImage out;
  if (f.has_alpha) {
    out = from_rgba(w, h, px);
  } else {
    out = {w, h, std::vector<uint8_t>(px, px + static_cast<size_t>(w) * h * 3)};
  }
  WebPFree(px);
  return out;
}

}  // namespace

void composite_on_white(const uint8_t rgba[4], uint8_t rgb[3]) {
  // PIL's ImagingAlphaComposite with an opaque white destination (7 bits of precision, a
  // division by 255 as two shifts).
  const uint32_t a = rgba[3];
  if (a == 0) {
    rgb[0] = rgb[1] = rgb[2] = 255;
    return;
  }
  constexpr uint32_t kBits = 7;
  const uint32_t blend = 255 * (255 - a);
  const uint32_t outa255 = a * 255 + blend;
  const uint32_t coef1 = a * 255 * 255 * (1u << kBits) / outa255;
  const uint32_t coef2 = 255 * (1u << kBits) - coef1;
  for (int c = 0; c < 3; ++c) {
    const uint32_t t = rgba[c] * coef1 + 255 * coef2 + (0x80u << kBits);
    rgb[c] = static_cast<uint8_t>(((((t >> 8) + t) >> 8)) >> kBits);
  }
}

RgbImage decode_image(const uint8_t* data, size_t size, int64_t max_pixels) {
  if (size == 0) bad("empty file");
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return decode_png(data, size, max_pixels);
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return decode_jpeg(data, size, max_pixels);
  if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0)
    return decode_webp(data, size, max_pixels);
  bad("unsupported format (PNG, JPEG and WebP are read)");
}

}  // namespace ts

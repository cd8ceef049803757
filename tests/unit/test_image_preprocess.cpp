// Image files through the decoders and Qwen2-VL / Qwen3-VL's processor against transformers'
// Qwen2VLImageProcessorPil (tests/tools/make_image_preprocess_refs.py made the references: a
// wide and a tall image, a PNG with alpha, a grayscale and a colour JPEG, a lossless WebP with
// alpha, each resized), within 1e-5; and bad files: empty, truncated, an unknown format, headers
// that claim 50000 x 50000 pixels (refused before decoding).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_paths.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"

namespace ts {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string image_path(const std::string& name) {
  return test::fixtures_dir() + "/images/" + name;
}

nlohmann::json refs() {
  std::ifstream in(image_path("refs.json"));
  return nlohmann::json::parse(in);
}

TEST(ImagePreprocess, MatchesTransformersProcessor) {
  const auto r = refs();
  ProcessorConfig p;
  p.patch = r["patch"].get<int64_t>();
  p.merge = r["merge"].get<int64_t>();
  p.temporal = r["temporal"].get<int64_t>();
  p.min_pixels = r["min_pixels"].get<int64_t>();
  p.max_pixels = r["max_pixels"].get<int64_t>();
  for (const auto& [name, want] : r["images"].items()) {
    const std::vector<uint8_t> bytes = read_bytes(image_path(name));
    const RgbImage im = decode_image(bytes.data(), bytes.size());
    EXPECT_EQ(im.width, want["width"].get<int64_t>()) << name;
    EXPECT_EQ(im.height, want["height"].get<int64_t>()) << name;
    const ImagePatches got = preprocess_image(im, p);
    ASSERT_EQ(got.grid_h, want["grid_h"].get<int64_t>()) << name;
    ASSERT_EQ(got.grid_w, want["grid_w"].get<int64_t>()) << name;
    // The reference holds HF's values as their 8-bit codes, frame 0 of each patch.
    const std::vector<uint8_t> codes = read_bytes(image_path(name + ".ref.u8"));
    const int64_t P = p.patch, per = 3 * p.temporal * P * P;
    ASSERT_EQ(static_cast<int64_t>(codes.size()) * p.temporal, got.grid_h * got.grid_w * per)
        << name;
    double worst = 0;
    int64_t off = 0;
    for (int64_t patch = 0; patch < got.grid_h * got.grid_w; ++patch)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t t = 0; t < p.temporal; ++t)
          for (int64_t i = 0; i < P * P; ++i) {
            const uint8_t code = codes[static_cast<size_t>((patch * 3 + c) * P * P + i)];
            const float want_v = (static_cast<float>(code * (1.0 / 255.0)) - 0.5f) / 0.5f;
            const float v =
                got.values[static_cast<size_t>(patch * per + (c * p.temporal + t) * P * P + i)];
            worst = std::max(worst, static_cast<double>(std::fabs(v - want_v)));
            ++off;
          }
    EXPECT_LE(worst, 1e-5) << name << ": max |difference| " << worst;
  }
}

TEST(ImagePreprocess, SmartResizeKeepsBounds) {
  EXPECT_EQ(smart_resize(64, 96, 32, 1024, 65536), (std::array<int64_t, 2>{64, 96}));
  // Above max_pixels: scaled down to multiples of the factor within it.
  const auto big = smart_resize(4000, 3000, 32, 65536, 1 << 20);
  EXPECT_LE(big[0] * big[1], 1 << 20);
  EXPECT_EQ(big[0] % 32, 0);
  EXPECT_EQ(big[1] % 32, 0);
  // Below min_pixels: scaled up.
  const auto small = smart_resize(10, 10, 32, 65536, 1 << 20);
  EXPECT_GE(small[0] * small[1], 65536);
  EXPECT_THROW(smart_resize(1, 300, 32, 1024, 65536), Error);
}

void expect_input_error(const std::vector<uint8_t>& bytes, const std::string& what) {
  try {
    decode_image(bytes.data(), bytes.size());
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("image:"), std::string::npos) << e.what();
  }
}

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

TEST(ImageDecode, BadFilesAreNamedErrors) {
  expect_input_error({}, "empty");
  expect_input_error({'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}, "GIF");
  for (const char* name : {"wide.png", "color.jpg", "tall.webp", "alpha.png", "gray.jpg"}) {
    std::vector<uint8_t> bytes = read_bytes(image_path(name));
    for (size_t keep : {bytes.size() / 2, size_t{20}, size_t{9}}) {
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(keep));
      expect_input_error(cut, std::string(name) + " cut to " + std::to_string(keep) + " bytes");
    }
  }
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

TEST(ImageDecode, HugeImagesAreRefusedBeforeDecoding) {
  // PNG: IHDR (width, height at bytes 16..23) rewritten, its CRC with it.
  std::vector<uint8_t> png = read_bytes(image_path("wide.png"));
  put_be32(&png[16], 50000);
  put_be32(&png[20], 50000);
  put_be32(&png[29], crc32(&png[12], 17));
  expect_input_error(png, "50000 x 50000 PNG");
  // JPEG: the SOF0 / SOF2 segment's height and width.
  std::vector<uint8_t> jpg = read_bytes(image_path("color.jpg"));
  bool patched = false;
  for (size_t i = 2; i + 9 < jpg.size() && !patched; ++i)
    if (jpg[i] == 0xff && (jpg[i + 1] == 0xc0 || jpg[i + 1] == 0xc2)) {
      jpg[i + 5] = 50000 >> 8;
      jpg[i + 6] = 50000 & 0xff;
      jpg[i + 7] = 50000 >> 8;
      jpg[i + 8] = 50000 & 0xff;
      patched = true;
    }
  ASSERT_TRUE(patched);
  expect_input_error(jpg, "50000 x 50000 JPEG");
  // A limit of 100 pixels refuses the real images too, whatever the format.
  for (const char* name : {"wide.png", "color.jpg", "tall.webp"}) {
    const std::vector<uint8_t> bytes = read_bytes(image_path(name));
    EXPECT_THROW(decode_image(bytes.data(), bytes.size(), 100), Error) << name;
  }
}

TEST(ImageDecode, AlphaCompositesLikePil) {
  // PIL.Image.alpha_composite over opaque white (values from PIL 13).
  const uint8_t half[4] = {0, 100, 200, 128};
  uint8_t out[3];
  composite_on_white(half, out);
  EXPECT_EQ(out[0], 127);
  EXPECT_EQ(out[1], 177);
  EXPECT_EQ(out[2], 227);
  const uint8_t clear[4] = {10, 20, 30, 0};
  composite_on_white(clear, out);
  EXPECT_EQ(out[0], 255);
  const uint8_t opaque[4] = {10, 20, 30, 255};
  composite_on_white(opaque, out);
  EXPECT_EQ(out[2], 30);
}

}  // namespace
}  // namespace ts

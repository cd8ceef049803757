// Gemma 3's vision (src/vision/gemma3_vision.*) against the tracked tiny fixture that
// tools/reference/make_gemma3_vision_fixture.py made with transformers: the processor over the
// test images, the SigLIP tower's and the projector's outputs from the HF directory and from the
// mmproj GGUF, and the logits of a prompt with two images, whose rows attend to the rest of their
// image (transformers' token_type_ids mask), through the API and `turbospark logits --image`.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "server/image_parts.h"
#include "server/image_prompt.h"
#include "test_paths.h"
#include "text/tokenizer.h"
#include "vision/gemma3_vision.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/image_rows.h"

namespace ts {
namespace {

constexpr const char* kFixture = "gemma3_vision";
constexpr int64_t kVocab = 96;

std::string file(const std::string& name) {
  return test::fixture_file(kFixture, name);
}

// The processor (PIL's bilinear resize to 32 x 32, rescale, SigLIP's 0.5 / 0.5 normalisation)
// gives Gemma3ImageProcessorPil's values for every test image.
TEST(Gemma3Vision, PreprocessingMatchesTheHfProcessor) {
  const std::string images = test::fixtures_dir() + "/images";
  int checked = 0;
  for (const char* name : {"alpha.png", "color.jpg", "gray.jpg", "tall.webp", "wide.png"}) {
    const auto png = test::read_bytes_file(images + "/" + name);
    const auto codes = test::read_bytes_file(file(std::string("preprocess/") + name + ".32.u8"));
    ASSERT_EQ(codes.size(), 3u * 32 * 32) << name;
    const std::vector<float> got =
        square_planes(decode_image(png.data(), png.size()), 32, 1.0 / 255.0, {0.5f, 0.5f, 0.5f},
                      {0.5f, 0.5f, 0.5f});
    double worst = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want = (static_cast<float>(codes[i] / 255.0) - 0.5f) / 0.5f;
      worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want)));
    }
    EXPECT_LE(worst, 1e-5) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// Images of any shape down to one pixel are resized to the square the tower takes.
TEST(Gemma3Vision, ExtremeShapesResizeToTheSquare) {
  for (const auto& [w, h] : {std::pair<int64_t, int64_t>{1, 1}, {1, 700}, {900, 2}, {32, 32}}) {
    RgbImage im;
    im.width = w;
    im.height = h;
    im.rgb.resize(static_cast<size_t>(w * h * 3));
    for (size_t i = 0; i < im.rgb.size(); ++i) im.rgb[i] = static_cast<uint8_t>(i * 37);
    const std::vector<float> p =
        square_planes(im, 32, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f});
    ASSERT_EQ(p.size(), 3u * 32 * 32) << w << " x " << h;
    for (float x : p) ASSERT_TRUE(x >= -1.0f && x <= 1.0f) << w << " x " << h;
  }
}

class Gemma3VisionForm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    hf_ = file("hf");
    tower_path_ = GetParam() == "hf" ? hf_ : file("mmproj-f32.gguf");
    meta_ = nlohmann::json::parse(std::ifstream(file("meta.json")));
    pixels_ = test::read_f32_file(file("image_pixel_values.f32"));
  }
  std::vector<EncodedImage> encode_pixels(Gemma3Vision& v, std::vector<float>* tower_out) {
    const size_t per = 3 * 32 * 32;
    std::vector<EncodedImage> out;
    for (size_t i = 0; i < 2; ++i) {
      const std::vector<float> t = v.tower(pixels_.data() + i * per);
      if (tower_out != nullptr) tower_out->insert(tower_out->end(), t.begin(), t.end());
      out.push_back(v.project(t));
    }
    return out;
  }
  std::vector<float> image_logits(const std::vector<EncodedImage>& images, int64_t batch,
                                  bool bidirectional) {
    const auto ids = meta_["image"]["prompt_ids"].get<std::vector<int32_t>>();
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = 64;
    o.kv_type = DType::F32;
    o.prefill_batch = batch;
    auto engine = Engine::open(hf_, o);
    const ImageRows rows(ids, meta_["image"]["image_token_id"].get<int32_t>(), images,
                         engine->cfg().n_embd, 0, ImageLayout::Bidirectional);
    RowInputs in = rows.inputs();
    if (!bidirectional) in.span = nullptr;
    Session s(*engine);
    std::vector<float> logits(ids.size() * kVocab);
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true, in);
    return logits;
  }
  std::string hf_, tower_path_;
  nlohmann::json meta_;
  std::vector<float> pixels_;
};

TEST_P(Gemma3VisionForm, TowerAndProjectorMatchTransformers) {
  auto v = Gemma3Vision::open(tower_path_, 2);
  EXPECT_EQ(v->config().tokens(), 16);
  std::vector<float> tower_out;
  const auto images = encode_pixels(*v, &tower_out);
  std::vector<float> embeds;
  for (const EncodedImage& im : images) {
    EXPECT_EQ(im.tokens(), 16);
    embeds.insert(embeds.end(), im.embeds.begin(), im.embeds.end());
  }
  const double t = test::max_rel_error(tower_out, test::read_f32_file(file("image_vision.f32")));
  const double e = test::max_rel_error(embeds, test::read_f32_file(file("image_embeds.f32")));
  std::cout << GetParam() << ": tower rel " << t << ", projector rel " << e << "\n";
  EXPECT_LE(t, 1e-4);
  EXPECT_LE(e, 1e-4);
}

// Both images' rows attend to the rest of their image: transformers' logits, whether the prompt
// goes in one pass or in passes of 20 rows (each image then starts a pass whole); with a causal
// mask the logits are not the reference's.
TEST_P(Gemma3VisionForm, ImagePromptEndToEnd) {
  auto v = Gemma3Vision::open(tower_path_, 2);
  const auto images = encode_pixels(*v, nullptr);
  const auto ref = test::read_f32_file(file("ref_logits_image.f32"));
  for (const int64_t batch : {64, 20}) {
    const auto c = test::compare_logits(image_logits(images, batch, true), ref, kVocab);
    std::cout << GetParam() << " batch " << batch << ": " << c.summary() << "\n";
    EXPECT_LE(c.rel, 1e-4) << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
  EXPECT_GT(test::compare_logits(image_logits(images, 64, false), ref, kVocab).rel, 1e-3);
}

// The image files through the decoder, the processor and the tower give the reference features.
TEST_P(Gemma3VisionForm, ImageFilesEndToEnd) {
  auto v = Gemma3Vision::open(tower_path_, 2);
  std::vector<float> embeds;
  for (const char* name : {"image0.png", "image1.png"}) {
    const auto png = test::read_bytes_file(file(name));
    const EncodedImage im = v->encode_file(png.data(), png.size());
    EXPECT_NE(im.key, 0u);
    embeds.insert(embeds.end(), im.embeds.begin(), im.embeds.end());
  }
  EXPECT_LE(test::max_rel_error(embeds, test::read_f32_file(file("image_embeds.f32"))), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Forms, Gemma3VisionForm, ::testing::Values("hf", "gguf"));

// An image's rows attend to each other: a pass never parts them, and one that cannot hold an
// image whole is a named error.
TEST(Gemma3Vision, ImageRowsStayInOnePass) {
  const int32_t span[] = {0, 3, 2, 1, 0, 0};
  RowInputs in;
  in.span = span;
  EXPECT_EQ(in.whole_images(6), 6);
  EXPECT_EQ(in.whole_images(5), 5);
  EXPECT_EQ(in.whole_images(4), 1);
  EXPECT_EQ(in.from(1).whole_images(3), 0);
  EXPECT_EQ(in.from(1).whole_images(4), 4);
}

TEST(Gemma3Vision, AnImageLargerThanAPassIsRefused) {
  const auto meta = nlohmann::json::parse(std::ifstream(file("meta.json")));
  auto v = Gemma3Vision::open(file("hf"), 2);
  const auto png = test::read_bytes_file(file("image0.png"));
  const std::vector<EncodedImage> images = {v->encode_file(png.data(), png.size())};
  // BOS, a text token, the image's block (start, 16 placeholders, end), a text token.
  const int32_t image = meta["image"]["image_token_id"].get<int32_t>();
  std::vector<int32_t> ids = {2, 17, meta["image"]["boi"].get<int32_t>()};
  ids.insert(ids.end(), 16, image);
  ids.push_back(meta["image"]["eoi"].get<int32_t>());
  ids.push_back(5);
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.prefill_batch = 8;
  auto engine = Engine::open(file("hf"), o);
  const ImageRows rows(ids, image, images, engine->cfg().n_embd, 0, ImageLayout::Bidirectional);
  Session s(*engine);
  std::vector<float> logits(kVocab);
  try {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), false, rows.inputs());
    ADD_FAILURE() << "an image of 16 rows went through passes of 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("do not fit in one pass"), std::string::npos) << e.what();
  }
}

// The server's image block, as Gemma3Processor lays it out: "\n\n" joined to the text on each side
// of start, the placeholders, end (here with the bundled model's tokenizer and made-up ids).
TEST(Gemma3Vision, ImageBlockHasItsMargins) {
  const auto engine = test::open_bundled_model(64);
  const Tokenizer tok = load_tokenizer(engine->spec());
  EncodedImage im;
  im.grid_h = im.grid_w = 2;
  std::string text = "Look";
  text.append(server::kImageMarker).append("there");
  std::vector<int32_t> want = tok.encode("Look\n\n", false, true);
  for (int32_t id : {6, 5, 5, 5, 5, 7}) want.push_back(id);
  const std::vector<int32_t> after = tok.encode("\n\nthere", false, true);
  want.insert(want.end(), after.begin(), after.end());
  int64_t first = -1;
  EXPECT_EQ(server::image_block_ids(text, {im}, tok, false, 5, 6, 7, "\n\n", &first), want);
  EXPECT_EQ(first, static_cast<int64_t>(tok.encode("Look\n\n", false, true).size()) + 1);
}

// `turbospark logits --image` from the HF directory and from the mmproj GGUF beside it.
TEST(Gemma3Vision, CliLogitsWithImagesMatchReference) {
  const std::string dir = file("meta.json").substr(0, file("meta.json").rfind('/'));
  for (const std::string& tower : {std::string(), " --mmproj " + dir + "/mmproj-f32.gguf"}) {
    const auto c = test::cli_image_logits(dir, tower, kVocab);
    EXPECT_LE(c.rel, 1e-4) << tower << ": " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << tower << ": " << c.summary();
  }
}

}  // namespace
}  // namespace ts

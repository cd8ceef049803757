// Qwen3-VL's vision tower (src/vision/) from the mmproj GGUF and from the HF directory of both
// fixtures (qwen3_vl, in the shared data; qwen3_vl_moe, bf16, in the repository): the fixture's
// pixel values (as the HF processor gave them) through the tower against the stored
// merger output and DeepStack features (HF float32), then the image prompt end to end against
// ref_logits_image.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/image_rows.h"
#include "vision/qwen3vl_vision.h"

namespace ts {
namespace {

struct VisionCase {
  const char* fixture;
  const char* form;  // "hf" or "gguf"
};

class Qwen3VlVision : public ::testing::TestWithParam<VisionCase> {
 protected:
  void SetUp() override {
    fixture_ = GetParam().fixture;
    what_ = fixture_ + " " + GetParam().form;
    TS_REQUIRE_SHARED(file("image_pixel_values.f32"));
    const bool hf = std::string(GetParam().form) == "hf";
    vision_path_ = hf ? file("hf/config.json") : file("mmproj-f32.gguf");
    model_path_ = hf ? vision_path_ : file("model-f32.gguf");
    TS_REQUIRE_SHARED(vision_path_);
    TS_REQUIRE_SHARED(model_path_);
    if (hf) vision_path_ = model_path_ = vision_path_.substr(0, vision_path_.rfind('/'));
    std::ifstream in(file("meta.json"));
    meta_ = nlohmann::json::parse(in);
    pixels_ = test::read_f32_file(file("image_pixel_values.f32"));
    grid_ = meta_["image"]["image_grid_thw"][0].get<std::vector<int64_t>>();
  }
  std::string file(const std::string& name) const { return test::fixture_file(fixture_, name); }
  EncodedImage encode() {
    auto v = Qwen3VLVision::open(vision_path_, 2);
    return v->encode(pixels_.data(), grid_[1], grid_[2]);
  }
  std::string fixture_, what_, vision_path_, model_path_;
  nlohmann::json meta_;
  std::vector<float> pixels_;
  std::vector<int64_t> grid_;  // T, H, W in patches
};

TEST_P(Qwen3VlVision, OutputsMatchTransformers) {
  const EncodedImage im = encode();
  EXPECT_EQ(im.grid_h, grid_[1] / 2);  // merged 2 x 2
  EXPECT_EQ(im.grid_w, grid_[2] / 2);
  const double e = test::max_rel_error(im.embeds, test::read_f32_file(file("image_embeds.f32")));
  const double d =
      test::max_rel_error(im.deepstack, test::read_f32_file(file("image_deepstack.f32")));
  std::cout << what_ << ": vision output rel " << e << ", DeepStack rel " << d << "\n";
  EXPECT_LE(e, 1e-5);
  EXPECT_LE(d, 1e-5);
}

TEST_P(Qwen3VlVision, ImagePromptEndToEnd) {
  const EncodedImage im = encode();
  const auto ids = meta_["image"]["prompt_ids"].get<std::vector<int32_t>>();
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  auto engine = Engine::open(model_path_, o);
  const int64_t V = engine->cfg().n_vocab, n = static_cast<int64_t>(ids.size());
  const ImageRows rows(ids, meta_["config"]["image_token_id"].get<int32_t>(), {im},
                       engine->cfg().n_embd, engine->cfg().n_deepstack);
  Session s(*engine);
  std::vector<float> logits(static_cast<size_t>(n * V));
  s.feed(ids.data(), n, logits.data(), true, rows.inputs());
  const auto c = test::compare_logits(logits, test::read_f32_file(file("ref_logits_image.f32")), V);
  std::cout << what_ << ": image prompt end to end " << c.summary() << "\n";
  EXPECT_LE(c.rel, 1e-4) << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
}

// The fixture's image file through the decoder and the processor gives HF's pixel values, and
// through the tower and the model HF's logits.
TEST_P(Qwen3VlVision, ImageFileEndToEnd) {
  std::ifstream in(file("image.png"), std::ios::binary);
  const std::vector<uint8_t> png((std::istreambuf_iterator<char>(in)), {});
  auto v = Qwen3VLVision::open(vision_path_, 2);
  // An mmproj GGUF carries no processor bounds: the fixtures' lowered ones, as a user gives them.
  if (std::string(GetParam().form) == "gguf") v->set_pixel_bounds(64, 65536);
  const ImagePatches p = preprocess_image(decode_image(png.data(), png.size()), v->processor());
  EXPECT_EQ(p.grid_h, grid_[1]);
  EXPECT_EQ(p.grid_w, grid_[2]);
  double worst = 0;
  ASSERT_EQ(p.values.size(), pixels_.size());
  for (size_t i = 0; i < pixels_.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(p.values[i] - pixels_[i])));
  std::cout << what_ << ": pixel values max |difference| " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
  const EncodedImage im = v->encode_file(png.data(), png.size());
  const double e = test::max_rel_error(im.embeds, test::read_f32_file(file("image_embeds.f32")));
  EXPECT_LE(e, 1e-5);
}

TEST_P(Qwen3VlVision, BadGridsAreRefused) {
  auto v = Qwen3VLVision::open(vision_path_, 2);
  EXPECT_THROW(v->encode(pixels_.data(), grid_[1] - 1, grid_[2]), Error);  // not a multiple
  EXPECT_THROW(v->encode(pixels_.data(), 0, grid_[2]), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, Qwen3VlVision,
    ::testing::Values(VisionCase{"qwen3_vl", "hf"}, VisionCase{"qwen3_vl", "gguf"},
                      VisionCase{"qwen3_vl_moe", "hf"}, VisionCase{"qwen3_vl_moe", "gguf"}),
    [](const auto& i) { return std::string(i.param.fixture) + "_" + i.param.form; });

TEST(Qwen3VlVisionOpen, TextModelIsNotAVisionTower) {
  const std::string gguf = test::fixture_file("qwen3_vl_moe", "model-f32.gguf");
  EXPECT_THROW(Qwen3VLVision::open(gguf, 1), Error);
}

}  // namespace
}  // namespace ts

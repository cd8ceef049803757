// Gemma 4's vision (src/vision/gemma4_vision.*) against the tracked tiny fixture that
// tools/reference/make_gemma4_vision_fixture.py made with transformers: the processor over the
// test images, the tower's and the embedder's outputs from the HF directory and from the mmproj
// GGUF, and the logits of a prompt with two images (their rows attending to the rest of their
// image on the sliding layer only, per-layer inputs taking the pad token at image rows), through
// the API and `turbospark logits --image`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "vision/gemma4_vision.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/image_rows.h"

namespace ts {
namespace {

constexpr const char* kFixture = "gemma4_vision";
constexpr int64_t kVocab = 64;

std::string file(const std::string& name) {
  return test::fixture_file(kFixture, name);
}

nlohmann::json meta() {
  return nlohmann::json::parse(std::ifstream(file("meta.json")));
}

// The worst difference of the processor's values from HF's 8-bit codes / 255.
double worst_against_codes(const ImagePatches& p, const std::vector<uint8_t>& codes) {
  if (p.values.size() != codes.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < codes.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(p.values[i]) -
                                      static_cast<double>(static_cast<float>(codes[i] / 255.0))));
  return worst;
}

// The aspect-preserving resize (PIL's bicubic), the rescale and the patch order give
// Gemma4ImageProcessorPil's values and grid for every test image.
TEST(Gemma4Vision, PreprocessingMatchesTheHfProcessor) {
  const auto m = meta();
  const std::string images = test::fixtures_dir() + "/images";
  int checked = 0;
  for (const auto& [name, grid] : m["preprocess"].items()) {
    const auto png = test::read_bytes_file(images + "/" + name);
    const ImagePatches p =
        gemma4_patches(decode_image(png.data(), png.size()), 2, 3, 70, 1.0 / 255.0);
    EXPECT_EQ(p.grid_h, grid[0].get<int64_t>()) << name;
    EXPECT_EQ(p.grid_w, grid[1].get<int64_t>()) << name;
    EXPECT_LE(worst_against_codes(p, test::read_bytes_file(file("preprocess/" + name + ".u8"))),
              1e-5)
        << name;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// transformers' get_aspect_ratio_preserving_size on shapes down to a pixel and past 200:1.
TEST(Gemma4Vision, AspectPreservingSizes) {
  using Size = std::array<int64_t, 2>;
  // 280 soft tokens of 16-pixel patches pooled 3 x 3: 2520 patches, sides multiples of 48.
  EXPECT_EQ(gemma4_size(768, 768, 16, 2520, 3), (Size{768, 768}));
  EXPECT_EQ(gemma4_size(480, 640, 16, 2520, 3), (Size{672, 912}));
  EXPECT_EQ(gemma4_size(1, 1, 16, 2520, 3), (Size{768, 768}));
  EXPECT_EQ(gemma4_size(10, 1000, 16, 2520, 3), (Size{48, 8016}));
  // One side rounds to nothing: one unit, the other its ratio in units, capped.
  EXPECT_EQ(gemma4_size(5000, 2, 16, 2520, 3), (Size{13440, 48}));
  EXPECT_EQ(gemma4_size(3000, 1, 16, 2520, 3), (Size{13440, 48}));
  EXPECT_THROW(gemma4_size(1, 1, 16, 8, 3), Error);
}

class Gemma4VisionForm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    hf_ = file("hf");
    tower_path_ = GetParam() == "hf" ? hf_ : file("mmproj-f32.gguf");
    meta_ = meta();
  }
  // The fixture's images through the processor's stored codes (HF's pixel values exactly).
  std::vector<EncodedImage> encode_codes(Gemma4Vision& v, std::vector<float>* tower_out) {
    const auto codes = test::read_bytes_file(file("image_codes.u8"));
    const int64_t per = v.config().patch_values();
    std::vector<EncodedImage> out;
    size_t at = 0;
    for (const auto& g : meta_["image"]["grids"]) {
      ImagePatches p;
      p.grid_h = g[0].get<int64_t>();
      p.grid_w = g[1].get<int64_t>();
      const auto n = static_cast<size_t>(p.grid_h * p.grid_w * per);
      for (size_t i = 0; i < n; ++i)
        p.values.push_back(static_cast<float>(codes.at(at + i) / 255.0));
      at += n;
      const std::vector<float> t = v.tower(p);
      if (tower_out != nullptr) tower_out->insert(tower_out->end(), t.begin(), t.end());
      out.push_back(v.project(t, p.grid_h, p.grid_w));
    }
    EXPECT_EQ(at, codes.size());
    return out;
  }
  std::vector<float> image_logits(const std::vector<EncodedImage>& images, int64_t batch,
                                  ImageLayout layout = ImageLayout::Bidirectional) {
    const auto ids = meta_["image"]["prompt_ids"].get<std::vector<int32_t>>();
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = 256;
    o.kv_type = DType::F32;
    o.prefill_batch = batch;
    auto engine = Engine::open(hf_, o);
    const ImageRows rows(ids, meta_["image"]["image_token_id"].get<int32_t>(), images,
                         engine->cfg().n_embd, 0, layout);
    Session s(*engine);
    std::vector<float> logits(ids.size() * kVocab);
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true, rows.inputs());
    return logits;
  }
  std::string hf_, tower_path_;
  nlohmann::json meta_;
};

TEST_P(Gemma4VisionForm, TowerAndEmbedderMatchTransformers) {
  auto v = Gemma4Vision::open(tower_path_, 2);
  std::vector<float> tower_out;
  const auto images = encode_codes(*v, &tower_out);
  std::vector<float> embeds;
  const auto tokens = meta_["image"]["tokens"].get<std::vector<int64_t>>();
  ASSERT_EQ(images.size(), tokens.size());
  for (size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(images[i].tokens(), tokens[i]);
    embeds.insert(embeds.end(), images[i].embeds.begin(), images[i].embeds.end());
  }
  const double t = test::max_rel_error(tower_out, test::read_f32_file(file("image_vision.f32")));
  const double e = test::max_rel_error(embeds, test::read_f32_file(file("image_embeds.f32")));
  std::cout << GetParam() << ": tower rel " << t << ", embedder rel " << e << "\n";
  EXPECT_LE(t, 1e-5);
  EXPECT_LE(e, 1e-5);
}

// The image files through the decoder, the processor and the tower give the reference features.
TEST_P(Gemma4VisionForm, ImageFilesEndToEnd) {
  auto v = Gemma4Vision::open(tower_path_, 2);
  // The mmproj GGUF has no processor settings: the fixture's 70 soft tokens given here.
  if (GetParam() == "gguf") {
    EXPECT_EQ(v->config().max_soft_tokens, 280);
  }
  std::vector<float> embeds;
  for (const auto& name : meta_["image"]["files"]) {
    const auto png = test::read_bytes_file(file(name.get<std::string>()));
    ImagePatches p = gemma4_patches(decode_image(png.data(), png.size()), 2, 3, 70, 1.0 / 255.0);
    const EncodedImage im = v->project(v->tower(p), p.grid_h, p.grid_w);
    embeds.insert(embeds.end(), im.embeds.begin(), im.embeds.end());
    if (GetParam() == "hf") {
      const EncodedImage whole = v->encode_file(png.data(), png.size());
      EXPECT_NE(whole.key, 0u);
      EXPECT_EQ(whole.embeds, im.embeds);
    }
  }
  EXPECT_LE(test::max_rel_error(embeds, test::read_f32_file(file("image_embeds.f32"))), 1e-5);
}

// Both images' rows attend to the rest of their image on the sliding layer: transformers' logits,
// whether the prompt goes in one pass or in passes of 80 rows (each image then starts a pass
// whole); with a causal mask they are transformers' causal ones.
TEST_P(Gemma4VisionForm, ImagePromptEndToEnd) {
  auto v = Gemma4Vision::open(tower_path_, 2);
  const auto images = encode_codes(*v, nullptr);
  const auto ref = test::read_f32_file(file("ref_logits_image.f32"));
  for (const int64_t batch : {256, 80}) {
    const auto c = test::compare_logits(image_logits(images, batch), ref, kVocab);
    std::cout << GetParam() << " batch " << batch << ": " << c.summary() << "\n";
    EXPECT_LE(c.rel, 1e-4) << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
  // Causal rows (E2B / E4B, use_bidirectional_attention null): transformers' causal logits, and
  // not the bidirectional reference.
  const std::vector<float> causal = image_logits(images, 256, ImageLayout::Causal);
  EXPECT_GT(test::compare_logits(causal, ref, kVocab).rel, 1e-3);
  const auto tail = test::read_f32_file(file("ref_logits_image_causal_tail.f32"));
  const auto c = test::compare_logits(
      std::vector<float>(causal.end() - static_cast<std::ptrdiff_t>(tail.size()), causal.end()),
      tail, kVocab);
  std::cout << GetParam() << " causal tail: " << c.summary() << "\n";
  EXPECT_LE(c.rel, 1e-4) << "causal: " << c.summary();
}

INSTANTIATE_TEST_SUITE_P(Forms, Gemma4VisionForm, ::testing::Values("hf", "gguf"));

// The text model says how its image rows attend: the fixture's "vision" both ways (on its sliding
// layer), a model without use_bidirectional_attention (E2B, E4B) causally.
TEST(Gemma4Vision, ImageLayoutFollowsTheTextModel) {
  auto v = Gemma4Vision::open(file("hf"), 2);
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  auto engine = Engine::open(file("hf"), o);
  EXPECT_EQ(engine->cfg().image_attention, ImageAttention::SlidingLayers);
  EXPECT_EQ(image_layout(*v, engine->cfg()), ImageLayout::Bidirectional);
  ArchConfig causal = engine->cfg();
  causal.image_attention = ImageAttention::None;
  EXPECT_EQ(image_layout(*v, causal), ImageLayout::Causal);
  EXPECT_TRUE(v->feeds(engine->cfg()));
  causal.family = Family::Gemma3;
  EXPECT_FALSE(v->feeds(causal));
}

// `turbospark logits --image` from the HF directory and from the mmproj GGUF beside it (which
// has no processor settings: the fixture's 70 tokens an image given by --image-max-tokens).
TEST(Gemma4Vision, CliLogitsWithImagesMatchReference) {
  const std::string dir = file("meta.json").substr(0, file("meta.json").rfind('/'));
  for (const std::string& tower :
       {std::string(), " --mmproj " + dir + "/mmproj-f32.gguf --image-max-tokens 70"}) {
    const auto c = test::cli_image_logits(dir, tower, kVocab);
    EXPECT_LE(c.rel, 1e-4) << tower << ": " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << tower << ": " << c.summary();
  }
  // Without the bound the mmproj's processor (280 tokens) makes the image more patches a side than
  // the fixture's position tables hold: a named error.
  std::string out;
  EXPECT_NE(
      test::run_command(test::binary_path() + " logits -m " + dir + "/hf --mmproj " + dir +
                            "/mmproj-f32.gguf --image " + dir + "/image0.png --tokens 2 --out " +
                            test::scratch_path("g4.f32") + " 2>&1",
                        &out),
      0);
  EXPECT_NE(out.find("image0.png: a Gemma 4 image of 36 x 66 patches: the position tables hold 36"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace ts

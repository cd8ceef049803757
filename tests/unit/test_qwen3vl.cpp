// Qwen3-VL's text decoder: interleaved M-RoPE (which pair takes which position stream; equal
// streams are ordinary rope, bit for bit) and the image prompt of the fixtures (qwen3_vl, dense;
// qwen3_vl_moe, Qwen3-MoE's experts) with the stored vision features and DeepStack features fed
// as the image rows, against HF's float32 logits, in prefill and through vision_end then one token
// at a time (the text after the image shifted by the cache's rope shift); the MoE one's experts
// streamed give the resident bits. Their text-only prompts run with the other families in
// test_fixture_logits (and test_expert_streaming).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "fixture_models.h"
#include "model/model_spec.h"
#include "qwen3vl_image_prompt.h"
#include "runtime/engine.h"
#include "runtime/rope_freqs.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "vision/image_rows.h"

namespace ts {
namespace {

// Both fixtures' text width and DeepStack layers.
constexpr int64_t kHidden = 64, kDeepStack = 2;

TEST(Qwen3VlRope, InterleavedStreamsFollowTransformers) {
  ArchConfig c;
  c.rotary_dim = 32;
  c.mrope_sections = {6, 5, 5};
  c.mrope_interleaved = true;
  // H on pairs 1, 4, ..., 13; W on 2, 5, ..., 14; T on the rest (pair 15 included).
  const std::vector<uint8_t> want = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
  EXPECT_EQ(mrope_pair_streams(c), want);
  c.mrope_interleaved = false;
  const std::vector<uint8_t> contiguous = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
  EXPECT_EQ(mrope_pair_streams(c), contiguous);
  c.mrope_sections.clear();
  EXPECT_TRUE(mrope_pair_streams(c).empty());
}

TEST(Qwen3VlRope, EqualStreamsAreOrdinaryRope) {
  auto b = make_cpu_backend(2);
  const int64_t M = 5, heads = 3, hd = 32;
  std::vector<float> inv(hd / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(5e6f, -2.0f * i / hd);
  std::vector<float> x(M * heads * hd);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> plain = x, multi = x, shifted = x;
  const std::vector<int32_t> pos = {0, 7, 8, 130, 4095};
  std::vector<int32_t> pos3, pos3_h;
  for (int32_t p : pos) pos3.insert(pos3.end(), {p, p, p});
  for (int32_t p : pos) pos3_h.insert(pos3_h.end(), {p, p + 1, p});
  ArchConfig c;
  c.rotary_dim = hd;
  c.mrope_sections = {6, 5, 5};
  c.mrope_interleaved = true;
  const std::vector<uint8_t> streams = mrope_pair_streams(c);
  RopeArgs r{hd, hd, true, inv.data()};
  b->rope(plain.data(), M, heads, pos.data(), r);
  RopeArgs rm = r;
  rm.pair_stream = streams.data();
  b->rope(multi.data(), M, heads, pos3.data(), rm);
  EXPECT_EQ(plain, multi);
  // A different H position changes exactly the H pairs (1, 4, ...) and no others.
  b->rope(shifted.data(), M, heads, pos3_h.data(), rm);
  for (int64_t m = 1; m < M; ++m)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const size_t a = static_cast<size_t>(m * heads * hd + i);
      EXPECT_EQ(shifted[a] != plain[a], streams[static_cast<size_t>(i)] == 1)
          << "row " << m << " pair " << i;
    }
}

struct ImageCase {
  const char* fixture;
  const char* form;  // "hf" or "gguf"
};

class Qwen3VlImage : public ::testing::TestWithParam<ImageCase> {
 protected:
  void SetUp() override {
    const ImageCase& c = GetParam();
    what_ = std::string(c.fixture) + " " + c.form;
    TS_REQUIRE_SHARED(test::fixture_file(c.fixture, "image_embeds.f32"));
    path_ = std::string(c.form) == "hf" ? test::fixture_file(c.fixture, "hf/config.json")
                                        : test::fixture_file(c.fixture, "model-f32.gguf");
    TS_REQUIRE_SHARED(path_);
    if (std::string(c.form) == "hf") path_ = path_.substr(0, path_.rfind('/'));
    ref_ = test::read_f32_file(test::fixture_file(c.fixture, "ref_logits_image.f32"));
    prompt_ = test::load_qwen3vl_image_prompt(c.fixture);
  }
  std::unique_ptr<Engine> open(int64_t batch, int64_t slots = 0) {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = 64;
    o.kv_type = DType::F32;
    o.prefill_batch = batch;
    o.expert_slots = slots;
    return Engine::open(path_, o);
  }
  std::string path_, what_;
  std::vector<float> ref_;
  test::Qwen3VlImagePrompt prompt_;
};

TEST_P(Qwen3VlImage, RopeIndexMatchesTransformers) {
  const ImageRows rows(prompt_.ids, prompt_.image_token, {prompt_.image}, kHidden, kDeepStack);
  EXPECT_EQ(rows.rope_pos(), prompt_.positions);
}

TEST_P(Qwen3VlImage, StoredFeaturesGiveReferenceLogits) {
  const ImageRows rows(prompt_.ids, prompt_.image_token, {prompt_.image}, kHidden, kDeepStack);
  const int64_t n = static_cast<int64_t>(prompt_.ids.size());
  for (int64_t batch : {64, 5}) {
    auto engine = open(batch);
    const int64_t V = engine->cfg().n_vocab;
    ASSERT_EQ(static_cast<int64_t>(ref_.size()), n * V);
    Session s(*engine);
    std::vector<float> logits(static_cast<size_t>(n * V));
    s.feed(prompt_.ids.data(), n, logits.data(), true, rows.inputs());
    const auto c = test::compare_logits(logits, ref_, V);
    std::cout << what_ << " image prompt, prefill batch " << batch << ": " << c.summary() << "\n";
    EXPECT_LE(c.rel, 1e-4) << "prefill batch " << batch << ": " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << "prefill batch " << batch << ": " << c.summary();
  }
  // Through vision_end with the image, then the text one token at a time with no positions given:
  // the cache's rope shift continues them as transformers does.
  auto engine = open(64);
  const int64_t V = engine->cfg().n_vocab;
  Session s(*engine);
  std::vector<float> logits(static_cast<size_t>(n * V));
  const int64_t head = prompt_.vision_end_row + 1;
  s.feed(prompt_.ids.data(), head, logits.data(), true, rows.inputs());
  for (int64_t i = head; i < n; ++i)
    s.feed(&prompt_.ids[static_cast<size_t>(i)], 1, &logits[i * V], false);
  const auto c = test::compare_logits(logits, ref_, V);
  std::cout << what_ << " image prompt, prefill + decode: " << c.summary() << "\n";
  EXPECT_LE(c.rel, 1e-4) << "prefill + decode: " << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << "prefill + decode: " << c.summary();
  // Back to before the image and on again: the shift is forgotten with the rows it followed.
  s.truncate(3);
  std::vector<float> again(static_cast<size_t>((n - 3) * V));
  const RowInputs rest = rows.inputs().from(3);
  s.feed(prompt_.ids.data() + 3, n - 3, again.data(), true, rest);
  const std::vector<float> tail(ref_.begin() + 3 * V, ref_.end());
  EXPECT_LE(test::compare_logits(again, tail, V).rel, 1e-4);
}

// The comparison can tell: without the DeepStack features, or with 1-D positions, the logits are
// far from the reference.
TEST_P(Qwen3VlImage, DeepStackAndPositionsMatter) {
  const ImageRows rows(prompt_.ids, prompt_.image_token, {prompt_.image}, kHidden, kDeepStack);
  const int64_t n = static_cast<int64_t>(prompt_.ids.size());
  auto engine = open(64);
  const int64_t V = engine->cfg().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * V));
  RowInputs no_deepstack = rows.inputs();
  no_deepstack.deepstack = nullptr;
  RowInputs flat = rows.inputs();
  flat.rope_pos = nullptr;
  for (const RowInputs& in : {no_deepstack, flat}) {
    Session s(*engine);
    s.feed(prompt_.ids.data(), n, logits.data(), true, in);
    EXPECT_GT(test::compare_logits(logits, ref_, V).rel, 1e-2);
  }
}

TEST_P(Qwen3VlImage, MismatchedImagesAreNamed) {
  EncodedImage wrong = prompt_.image;
  wrong.grid_w = 2;  // 4 tokens for 6 placeholders (and features of 6)
  EXPECT_THROW(ImageRows(prompt_.ids, prompt_.image_token, {wrong}, kHidden, kDeepStack), Error);
  EXPECT_THROW(ImageRows(prompt_.ids, prompt_.image_token, {}, kHidden, kDeepStack), Error);
  EXPECT_THROW(ImageRows(prompt_.ids, prompt_.image_token, {prompt_.image, prompt_.image}, kHidden,
                         kDeepStack),
               Error);
  EXPECT_THROW(ImageRows(prompt_.ids, prompt_.image_token, {prompt_.image}, 32, kDeepStack), Error);
}

// The image prompt with the experts streamed through every slot count from top-k up: the resident
// logits bit for bit, in prefill passes of 5 rows (an image cut across passes) and in decode.
TEST_P(Qwen3VlImage, StreamedExpertsAreBitIdenticalToResident) {
  const ArchConfig c = open(64)->cfg();
  if (!c.is_moe()) GTEST_SKIP() << what_ << " has no experts";
  const auto logits = [&](int64_t slots, bool decode) {
    return test::image_prompt_logits(*open(5, slots), prompt_, decode);
  };
  for (const bool decode : {false, true}) {
    const std::vector<float> resident = logits(0, decode);
    for (int64_t slots = c.n_expert_used; slots < c.n_expert; ++slots) {
      const std::vector<float> streamed = logits(slots, decode);
      ASSERT_EQ(resident.size(), streamed.size());
      EXPECT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
          << what_ << (decode ? " decode" : " prefill") << " with " << slots << " slots";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, Qwen3VlImage,
    ::testing::Values(ImageCase{"qwen3_vl", "hf"}, ImageCase{"qwen3_vl", "gguf"},
                      ImageCase{"qwen3_vl_moe", "hf"}, ImageCase{"qwen3_vl_moe", "gguf"}),
    [](const auto& i) { return std::string(i.param.fixture) + "_" + i.param.form; });

}  // namespace
}  // namespace ts

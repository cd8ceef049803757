// Qwen3-VL's decoder on the CUDA backend (ctest label `cuda`; skips without a device): interleaved
// M-RoPE (three positions a row, each rotary pair taking one of them) and DeepStack (vision
// features added to the hidden states of the first layers at the image rows), with the vision
// tower's outputs as the fixture stores them, against the HF reference and the CPU backend: the
// text prompt and the image prompt, in prefill, decode and decode replayed from CUDA graphs, two
// sequences through one forward pass and batched decode steps (the server's path), and
// `turbospark logits --image` with the tower on the host and the decoder on the GPU. Both
// fixtures: qwen3_vl (dense) and qwen3_vl_moe (Qwen3-MoE's experts, also streamed against
// resident); the latter has not yet run on a GPU, so these tests ask for it with
// TURBOSPARK_UNVERIFIED_GPU_OPS=1 (children inherit it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "model/model_spec.h"
#include "qwen3vl_image_prompt.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "vision/image_rows.h"

namespace ts {
namespace {

constexpr const char* kFixtures[] = {"qwen3_vl", "qwen3_vl_moe"};
constexpr double kF32Bound = 1e-4;  // the CPU's bound against the reference, f32 KV
constexpr double kF16Bound = 5e-3;  // the other fixtures' bound with an f16 cache

// The fixture's image prompt and its reference logits (ref_logits_image.f32).
struct ImagePrompt : test::Qwen3VlImagePrompt {
  std::vector<float> ref;
};

ImagePrompt load_image_prompt(const std::string& fixture) {
  ImagePrompt p{test::load_qwen3vl_image_prompt(fixture), {}};
  p.ref = test::read_f32_file(test::fixture_file(fixture, "ref_logits_image.f32"));
  return p;
}

std::unique_ptr<Engine> open_engine(const std::string& path, const std::string& backend,
                                    int64_t batch, DType kv = DType::F32, int64_t slots = 0) {
  EngineOptions o;
  o.expert_slots = slots;
  o.backend = backend;
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = kv;
  o.prefill_batch = batch;
  return Engine::open(path, o);
}

ImageRows image_rows(const ImagePrompt& p, const Engine& engine) {
  return ImageRows(p.ids, p.image_token, {p.image}, engine.cfg().n_embd, engine.cfg().n_deepstack);
}

// The image prompt's logits [n][V]: in prefill passes of `batch` rows, or through vision_end in
// one pass and then one token at a time (no positions given: the cache's rope shift continues
// them); the experts streamed through `slots` slots a layer (0: resident).
std::vector<float> image_logits(const std::string& path, const std::string& backend,
                                const ImagePrompt& p, int64_t batch, bool decode,
                                DType kv = DType::F32, int64_t slots = 0) {
  return test::image_prompt_logits(*open_engine(path, backend, batch, kv, slots), p, decode);
}

// Held to `bound` against the reference (argmax too) and against the CPU's logits.
void expect_match(const std::vector<float>& gpu, const std::vector<float>& ref,
                  const std::vector<float>& cpu, int64_t V, double bound, const std::string& what) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  const auto c = test::compare_logits(gpu, ref, V);
  const auto vs_cpu = test::compare_logits(gpu, cpu, V);
  std::cout << what << ": vs reference " << c.summary() << "; vs CPU " << vs_cpu.summary() << "\n";
  EXPECT_LE(c.rel, bound) << what << ", vs reference: " << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << what << ", vs reference: " << c.summary();
  EXPECT_LE(vs_cpu.rel, bound) << what << ", vs CPU: " << vs_cpu.summary();
}

struct Case {
  const char* fixture;
  const char* form;  // "hf", "f32"
};

class CudaQwen3Vl : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(0, setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1));
    for (const test::FixtureForm& f : test::fixture_forms({GetParam().fixture}))
      if (f.form == GetParam().form) form_ = f;
    if (form_.path.empty())
      GTEST_SKIP() << "reference data absent: " << GetParam().fixture << " " << GetParam().form;
  }
  std::string fixture() const { return GetParam().fixture; }
  test::FixtureForm form_;
};

// The text prompt: every row's three positions equal, M-RoPE is ordinary rope.
TEST_P(CudaQwen3Vl, TextPromptMatchesReferenceAndCpu) {
  const test::FixtureForm& f = form_;
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const std::vector<float> ref = test::read_f32_file(test::fixture_ref_logits(f));
  const int64_t V = static_cast<int64_t>(ref.size() / ids.size());
  const std::vector<float> cpu = test::run_logits(f.path, ids, {});
  for (const bool decode : {false, true})
    for (const int64_t batch : {64, 7}) {
      if (decode && batch != 64) continue;
      const std::vector<float> gpu =
          test::run_logits(f.path, ids, {.backend = "cuda", .batch = batch, .decode = decode});
      expect_match(
          gpu, ref, cpu, V, kF32Bound,
          f.form + " text, " + (decode ? "decode" : "prefill batch " + std::to_string(batch)));
    }
  // The default f16 cache against the CPU with the same cache.
  const std::vector<float> gpu16 =
      test::run_logits(f.path, ids, {.backend = "cuda", .kv = DType::F16});
  const std::vector<float> cpu16 = test::run_logits(f.path, ids, {.kv = DType::F16});
  expect_match(gpu16, ref, cpu16, V, kF16Bound, f.form + " text, f16 cache");
}

// The image prompt with the stored vision and DeepStack features as its image rows.
TEST_P(CudaQwen3Vl, ImagePromptMatchesReferenceAndCpu) {
  TS_REQUIRE_SHARED(test::fixture_file(fixture(), "image_embeds.f32"));
  const test::FixtureForm& f = form_;
  const ImagePrompt p = load_image_prompt(fixture());
  const int64_t V = static_cast<int64_t>(p.ref.size() / p.ids.size());
  for (const bool decode : {false, true})
    for (const int64_t batch : {64, 5}) {
      if (decode && batch != 64) continue;
      const std::vector<float> cpu = image_logits(f.path, "cpu", p, batch, decode);
      const std::vector<float> gpu = image_logits(f.path, "cuda", p, batch, decode);
      expect_match(gpu, p.ref, cpu, V, kF32Bound,
                   f.form + " image, " +
                       (decode ? "prefill through vision_end + decode"
                               : "prefill batch " + std::to_string(batch)));
    }
  const std::vector<float> cpu16 = image_logits(f.path, "cpu", p, 64, false, DType::F16);
  const std::vector<float> gpu16 = image_logits(f.path, "cuda", p, 64, false, DType::F16);
  expect_match(gpu16, p.ref, cpu16, V, kF16Bound, f.form + " image, f16 cache");
}

// Decode replayed from CUDA graphs (the three positions a row re-read at every replay, shifted
// after the image) gives the bits of eager decode.
TEST_P(CudaQwen3Vl, ReplayedDecodeIsBitIdenticalToEager) {
  TS_REQUIRE_SHARED(test::fixture_file(fixture(), "image_embeds.f32"));
  const test::FixtureForm& f = form_;
  const ImagePrompt p = load_image_prompt(fixture());
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const test::LogitsRun run{.backend = "cuda", .decode = true, .kv = DType::F16};
  ASSERT_EQ(0, setenv("TURBOSPARK_CUDA_GRAPHS", "0", 1));
  const std::vector<float> eager_text = test::run_logits(f.path, ids, run);
  const std::vector<float> eager_image = image_logits(f.path, "cuda", p, 64, true, DType::F16);
  ASSERT_EQ(0, unsetenv("TURBOSPARK_CUDA_GRAPHS"));
  const std::vector<float> text = test::run_logits(f.path, ids, run);
  const std::vector<float> image = image_logits(f.path, "cuda", p, 64, true, DType::F16);
  ASSERT_EQ(text.size(), eager_text.size());
  ASSERT_EQ(image.size(), eager_image.size());
  EXPECT_EQ(0, std::memcmp(text.data(), eager_text.data(), text.size() * sizeof(float)))
      << f.form << " text: max rel diff " << test::max_rel_error(text, eager_text);
  EXPECT_EQ(0, std::memcmp(image.data(), eager_image.data(), image.size() * sizeof(float)))
      << f.form << " image: max rel diff " << test::max_rel_error(image, eager_image);
}

// The MoE fixture's image prompt with its experts streamed through top-k slots on the GPU: the
// resident bits, in prefill passes of 5 rows and in decode.
TEST_P(CudaQwen3Vl, StreamedExpertsAreBitIdenticalToResident) {
  TS_REQUIRE_SHARED(test::fixture_file(fixture(), "image_embeds.f32"));
  const test::FixtureForm& f = form_;
  const int64_t k = open_model_spec(f.path)->cfg.n_expert_used;
  if (k == 0) GTEST_SKIP() << f.fixture << " has no experts";
  const ImagePrompt p = load_image_prompt(fixture());
  for (const bool decode : {false, true}) {
    const std::vector<float> resident = image_logits(f.path, "cuda", p, 5, decode, DType::F16);
    const std::vector<float> streamed = image_logits(f.path, "cuda", p, 5, decode, DType::F16, k);
    ASSERT_EQ(resident.size(), streamed.size());
    EXPECT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
        << f.form << (decode ? " decode" : " prefill") << ": max rel diff "
        << test::max_rel_error(streamed, resident);
  }
}

// The server's path: the image prompt through vision_end and the text prompt's first rows in one
// forward pass (two chunks, one with image rows), then both one token at a time in batched
// decode steps (recorded after the first). Each sequence's rows [n][V] as one run.
std::vector<std::vector<float>> two_sequences(const std::string& path, const std::string& backend,
                                              const ImagePrompt& p,
                                              const std::vector<int32_t>& text) {
  auto engine = open_engine(path, backend, 64);
  const ImageRows rows = image_rows(p, *engine);
  const auto V = static_cast<size_t>(engine->cfg().n_vocab);
  Forward forward(*engine, 64);
  KvCache kv_image(*engine, 64), kv_text(*engine, 64);
  std::vector<std::vector<float>> out = {std::vector<float>(p.ids.size() * V),
                                         std::vector<float>(text.size() * V)};
  const auto head = static_cast<size_t>(p.vision_end_row + 1), text_head = size_t{4};
  SeqChunk a{&kv_image, p.ids.data(), static_cast<int64_t>(head), out[0].data(), true};
  a.in = rows.inputs();
  const SeqChunk b{&kv_text, text.data(), static_cast<int64_t>(text_head), out[1].data(), true};
  forward.run({a, b});
  for (size_t i = head, j = text_head; i < p.ids.size() || j < text.size(); ++i, ++j) {
    std::vector<SeqChunk> step;
    if (i < p.ids.size()) step.push_back({&kv_image, &p.ids[i], 1, out[0].data() + i * V, false});
    if (j < text.size()) step.push_back({&kv_text, &text[j], 1, out[1].data() + j * V, false});
    forward.run(step);
  }
  return out;
}

TEST_P(CudaQwen3Vl, BatchedSequencesMatchReferenceAndCpu) {
  TS_REQUIRE_SHARED(test::fixture_file(fixture(), "image_embeds.f32"));
  const test::FixtureForm& f = form_;
  const ImagePrompt p = load_image_prompt(fixture());
  const std::vector<int32_t> text = test::fixture_prompt(f);
  const std::vector<float> text_ref = test::read_f32_file(test::fixture_ref_logits(f));
  const int64_t V = static_cast<int64_t>(p.ref.size() / p.ids.size());
  const auto cpu = two_sequences(f.path, "cpu", p, text);
  const auto gpu = two_sequences(f.path, "cuda", p, text);
  expect_match(gpu[0], p.ref, cpu[0], V, kF32Bound, f.form + " batched, image sequence");
  expect_match(gpu[1], text_ref, cpu[1], V, kF32Bound, f.form + " batched, text sequence");
}

INSTANTIATE_TEST_SUITE_P(Forms, CudaQwen3Vl,
                         ::testing::Values(Case{"qwen3_vl", "hf"}, Case{"qwen3_vl", "f32"},
                                           Case{"qwen3_vl_moe", "hf"}, Case{"qwen3_vl_moe", "f32"}),
                         [](const auto& i) {
                           return std::string(i.param.fixture) + "_" + i.param.form;
                         });

// `turbospark logits --image` on the GPU: the vision tower encodes image.png on the host, the
// decoder runs on the device; from the HF directory and from GGUF + mmproj, prefill and decode.
TEST(CudaQwen3VlCli, LogitsWithAnImageMatchReference) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(0, setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1));
  for (const char* fixture : kFixtures) {
    if (test::fixture_file(fixture, "mmproj-f32.gguf").empty()) {
      std::cout << fixture << ": reference data absent\n";
      continue;
    }
    std::string dir = test::fixture_file(fixture, "meta.json");
    dir = dir.substr(0, dir.rfind('/'));
    const ImagePrompt p = load_image_prompt(fixture);
    const int64_t V = static_cast<int64_t>(p.ref.size() / p.ids.size());
    // An mmproj GGUF has no processor bounds: the images are small enough not to be resized.
    const std::string gguf = dir + "/model-f32.gguf --mmproj " + dir +
                             "/mmproj-f32.gguf --image-token " + std::to_string(p.image_token) +
                             " --image-min-pixels 64";
    for (const std::string& model : {dir + "/hf", gguf})
      for (const char* mode : {"prefill", "decode"}) {
        const std::string out_file = test::scratch_path(std::string("logits_") + mode + ".f32");
        std::string out;
        ASSERT_EQ(test::run_command(
                      test::binary_path() + " logits -m " + model + " --image " + dir +
                          "/image.png --tokens " + test::ids_csv(p.ids) + " --out " + out_file +
                          " --kv-type f32 -t 2 --backend cuda --mode " + mode + " 2>&1",
                      &out),
                  0)
            << out;
        const auto c = test::compare_logits(test::read_f32_file(out_file), p.ref, V);
        std::cout << model << " " << mode << ": " << c.summary() << "\n";
        EXPECT_LE(c.rel, kF32Bound) << model << " " << mode << ": " << c.summary();
        EXPECT_EQ(c.argmax_mismatches, 0) << model << " " << mode << ": " << c.summary();
      }
  }
}

}  // namespace
}  // namespace ts

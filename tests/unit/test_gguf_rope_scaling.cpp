// Rope scaling stated by GGUF keys, for every family: linear (rope.scaling.type = linear, or a
// factor alone, also under the older rope.scale_linear) runs as linear, "none" as none, YaRN as
// transformers computes it, and other schemes (LongRoPE), which would change every position's
// frequencies, are refused by name rather than run as plain rope. A linear factor beside llama3's
// rope_freqs tensor is refused too. End to end, linear and YaRN give transformers' logits, from the
// GGUF (always) and from the HF form (when the shared HF form is there).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/family.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "rope_scaling_cases.h"
#include "test_paths.h"

namespace ts {
namespace {

using test::fixture_gguf;
using test::gguf_with_keys;
using Keys = test::GgufKeys;

ArchConfig config_of(const std::string& path) {
  return read_arch_config(*ModelSource::open(path));
}

TEST(GgufRopeScaling, LinearNoneAndRefusedTypes) {
  const std::string qwen3 = fixture_gguf("qwen3");
  const auto f32 = [](double v) { return gguf_float(GgufType::F32, v); };
  ArchConfig c = config_of(gguf_with_keys(
      qwen3,
      {{"qwen3.rope.scaling.type", gguf_string("linear")}, {"qwen3.rope.scaling.factor", f32(2)}},
      "linear"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_factor, 2.0f);
  c = config_of(gguf_with_keys(qwen3, {{"qwen3.rope.scale_linear", f32(4)}}, "scale-linear"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_factor, 4.0f);
  c = config_of(gguf_with_keys(
      qwen3,
      {{"qwen3.rope.scaling.type", gguf_string("none")}, {"qwen3.rope.scaling.factor", f32(4)}},
      "none"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  c = config_of(gguf_with_keys(qwen3, {{"qwen3.rope.scaling.factor", f32(1)}}, "factor-one"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  for (const char* type : {"longrope", "su"}) {
    const std::string path = gguf_with_keys(
        qwen3,
        {{"qwen3.rope.scaling.type", gguf_string(type)}, {"qwen3.rope.scaling.factor", f32(4)}},
        type);
    try {
      config_of(path);
      ADD_FAILURE() << type << " was not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(type), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(config_of(gguf_with_keys(qwen3, {{"qwen3.rope.scaling.type", gguf_string("linear")}},
                                        "linear-no-factor")),
               Error);
  // YaRN needs its original context; DeepSeek's variant (a log multiplier) is refused outside
  // DeepSeek models (test_mla_config reads it in one).
  const Keys yarn = {{"qwen3.rope.scaling.type", gguf_string("yarn")},
                     {"qwen3.rope.scaling.factor", f32(4)}};
  EXPECT_THROW(config_of(gguf_with_keys(qwen3, yarn, "yarn-no-context")), Error);
  Keys deepseek = yarn;
  deepseek.push_back({"qwen3.rope.scaling.original_context_length", gguf_int(GgufType::U32, 32)});
  deepseek.push_back({"qwen3.rope.scaling.yarn_log_multiplier", f32(0.1)});
  EXPECT_THROW(config_of(gguf_with_keys(qwen3, deepseek, "yarn-deepseek")), Error);
  // llama3 scaling (the rope_freqs tensor) and a linear factor at once (a fixture of the shared
  // data only).
  const std::string llama3 = test::fixture_file("llama_rope_llama3", "model-f32.gguf");
  if (llama3.empty()) GTEST_SKIP() << "shared reference data absent: llama_rope_llama3";
  EXPECT_THROW(
      open_model_spec(gguf_with_keys(llama3, {{"llama.rope.scaling.factor", f32(2)}}, "both")),
      Error);
}

// Where a rope-scaling case's HF form comes from: the fixture's shared HF directory, with the
// case's rope parameters at `layer_type` ("" for the whole model).
struct HfRope {
  std::string fixture;
  std::string layer_type;
  nlohmann::json rope;
};

// A copy of the fixture's shared HF form (at `hf`) with r.rope as its rope parameters (rope_theta
// kept), at r.layer_type of a per-layer-type `rope_parameters` (Gemma 3) or for the whole model.
std::string hf_with_rope(const std::string& hf, const HfRope& r) {
  std::string dir = test::scratch_path(r.fixture + "-scaled-hf");
  std::filesystem::remove_all(dir);
  std::filesystem::copy(hf, dir);
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  nlohmann::json& params =
      r.layer_type.empty() ? config["rope_parameters"] : config["rope_parameters"][r.layer_type];
  nlohmann::json rope = r.rope;
  rope["rope_theta"] = params["rope_theta"];
  params = rope;
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

// rc's GGUF against transformers in prefill and decode; the plain fixture farther than
// `plain_above` from the reference (else the reference would not tell scaled rope from plain); and
// the HF form with the same rope parameters, when the shared data is there.
void expect_matches_transformers(const test::RopeScalingCase& rc, double plain_above,
                                 const HfRope& hf_rope) {
  const int64_t V = rc.vocab();
  for (const bool decode : {false, true}) {
    test::LogitsRun run = rc.run;
    run.decode = decode;
    const auto c = test::compare_logits(test::run_logits(rc.gguf, rc.ids, run), rc.ref, V);
    EXPECT_LE(c.rel, 1e-4) << (decode ? "decode: " : "prefill: ") << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
  const auto plain =
      test::compare_logits(test::run_logits(rc.plain_gguf, rc.ids, rc.run), rc.ref, V);
  EXPECT_GT(plain.rel, plain_above) << "plain rope is as close: the reference would not tell";
  const std::string hf = test::shared_path("fixtures/" + hf_rope.fixture + "/hf");
  TS_REQUIRE_SHARED(hf);
  const std::string hf_dir = hf_with_rope(hf, hf_rope);
  const auto c = test::compare_logits(test::run_logits(hf_dir, rc.ids, rc.run), rc.ref, V);
  EXPECT_LE(c.rel, 1e-4) << "HF form: " << c.summary();
}

// Linear scaling against transformers (tests/tools/make_rope_scaling_reference.py: the gemma3
// fixture with factor 8 on its global layers, as Gemma 3 4B-27B carry it): the GGUF with the
// converter's keys, in prefill and decode, and the HF form with the same rope parameters.
TEST(GgufRopeScaling, LinearMatchesTransformers) {
  expect_matches_transformers(
      test::gemma3_linear8(), 1e-3,
      {"gemma3", "full_attention", {{"rope_type", "linear"}, {"factor", 8.0}}});
}

// YaRN against transformers (tests/tools/make_rope_scaling_reference.py: the qwen3 fixture, factor
// 4 over an original context of 16, its prompt repeated to 40 tokens, float32): the GGUF with
// llama.cpp's keys, in prefill and decode, and the HF form with the same rope parameters.
TEST(GgufRopeScaling, YarnMatchesTransformers) {
  expect_matches_transformers(
      test::qwen3_yarn4(), 1e-2,
      {"qwen3",
       "",
       {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}}});
}

}  // namespace
}  // namespace ts

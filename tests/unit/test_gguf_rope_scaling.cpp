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
#include "test_paths.h"

namespace ts {
namespace {

using Keys = std::vector<std::pair<std::string, GgufValue>>;

// A copy of the GGUF at `from` with `keys` added (after its own, which must not hold them).
std::string with_keys(const std::string& from, const Keys& keys, const std::string& name) {
  const auto src = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : src->metadata())
    if (key != "general.alignment") w.add_kv(key, value);
  w.set_alignment(static_cast<uint32_t>(src->alignment()));
  for (const auto& [key, value] : keys) w.add_kv(key, value);
  for (const GgufTensor& t : src->tensors())
    w.add_tensor(t.name, t.dtype, t.dims, src->tensor_data(t), t.nbytes);
  std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

std::string fixture_gguf(const std::string& family) {
  return test::fixtures_dir() + "/models/" + family + "/model-f32.gguf";
}

ArchConfig config_of(const std::string& path) {
  return read_arch_config(*ModelSource::open(path));
}

// A copy of the fixture's shared HF form with `rope` as its rope parameters (rope_theta kept), at
// `layer_type` of a per-layer-type `rope_parameters` (Gemma 3) or for the whole model ("").
std::string hf_with_rope(const std::string& hf, const std::string& name,
                         const std::string& layer_type, nlohmann::json rope) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::copy(hf, dir);
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  nlohmann::json& params =
      layer_type.empty() ? config["rope_parameters"] : config["rope_parameters"][layer_type];
  rope["rope_theta"] = params["rope_theta"];
  params = rope;
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

TEST(GgufRopeScaling, LinearNoneAndRefusedTypes) {
  const std::string qwen3 = fixture_gguf("qwen3");
  const auto f32 = [](double v) { return gguf_float(GgufType::F32, v); };
  ArchConfig c = config_of(with_keys(
      qwen3,
      {{"qwen3.rope.scaling.type", gguf_string("linear")}, {"qwen3.rope.scaling.factor", f32(2)}},
      "linear"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_factor, 2.0f);
  c = config_of(with_keys(qwen3, {{"qwen3.rope.scale_linear", f32(4)}}, "scale-linear"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_factor, 4.0f);
  c = config_of(with_keys(
      qwen3,
      {{"qwen3.rope.scaling.type", gguf_string("none")}, {"qwen3.rope.scaling.factor", f32(4)}},
      "none"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  c = config_of(with_keys(qwen3, {{"qwen3.rope.scaling.factor", f32(1)}}, "factor-one"));
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  for (const char* type : {"longrope", "su"}) {
    const std::string path = with_keys(
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
  EXPECT_THROW(config_of(with_keys(qwen3, {{"qwen3.rope.scaling.type", gguf_string("linear")}},
                                   "linear-no-factor")),
               Error);
  // YaRN needs its original context; DeepSeek's variant (a log multiplier) is refused.
  const Keys yarn = {{"qwen3.rope.scaling.type", gguf_string("yarn")},
                     {"qwen3.rope.scaling.factor", f32(4)}};
  EXPECT_THROW(config_of(with_keys(qwen3, yarn, "yarn-no-context")), Error);
  Keys deepseek = yarn;
  deepseek.push_back({"qwen3.rope.scaling.original_context_length", gguf_int(GgufType::U32, 32)});
  deepseek.push_back({"qwen3.rope.scaling.yarn_log_multiplier", f32(0.1)});
  EXPECT_THROW(config_of(with_keys(qwen3, deepseek, "yarn-deepseek")), Error);
  // llama3 scaling (the rope_freqs tensor) and a linear factor at once.
  EXPECT_THROW(open_model_spec(with_keys(fixture_gguf("llama_rope_llama3"),
                                         {{"llama.rope.scaling.factor", f32(2)}}, "both")),
               Error);
}

// Linear scaling against transformers (tests/tools/make_rope_scaling_reference.py: the gemma3
// fixture with factor 8 on its global layers, as Gemma 3 4B-27B carry it): the GGUF with the
// converter's keys, in prefill and decode, and the HF form with the same rope parameters.
TEST(GgufRopeScaling, LinearMatchesTransformers) {
  const std::string dir = test::fixtures_dir() + "/models/gemma3";
  const std::vector<float> ref = test::read_f32_file(dir + "/ref_logits_linear8.f32");
  const std::vector<int32_t> ids = test::fixture_prompt(test::fixture_forms({"gemma3"}).front());
  const auto V = static_cast<int64_t>(ref.size() / ids.size());
  const std::string gguf = with_keys(fixture_gguf("gemma3"),
                                     {{"gemma3.rope.scaling.type", gguf_string("linear")},
                                      {"gemma3.rope.scaling.factor", gguf_float(GgufType::F32, 8)}},
                                     "gemma3-linear");
  for (const bool decode : {false, true}) {
    const auto c = test::compare_logits(test::run_logits(gguf, ids, {.decode = decode}), ref, V);
    EXPECT_LE(c.rel, 1e-4) << (decode ? "decode: " : "prefill: ") << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
  const auto plain =
      test::compare_logits(test::run_logits(fixture_gguf("gemma3"), ids, {}), ref, V);
  EXPECT_GT(plain.rel, 1e-3) << "plain rope is as close: the reference would not tell";
  const std::string hf = test::shared_path("fixtures/gemma3/hf");
  TS_REQUIRE_SHARED(hf);
  const std::string hf_dir = hf_with_rope(hf, "gemma3-linear-hf", "full_attention",
                                          {{"rope_type", "linear"}, {"factor", 8.0}});
  const auto c = test::compare_logits(test::run_logits(hf_dir, ids, {}), ref, V);
  EXPECT_LE(c.rel, 1e-4) << "HF form: " << c.summary();
}

// YaRN against transformers (tests/tools/make_rope_scaling_reference.py: the qwen3 fixture, factor
// 4 over an original context of 32, its prompt repeated to 96 tokens, float32): the GGUF with
// llama.cpp's keys, in prefill and decode, and the HF form with the same rope parameters.
TEST(GgufRopeScaling, YarnMatchesTransformers) {
  const std::string dir = test::fixtures_dir() + "/models/qwen3";
  const std::vector<float> ref = test::read_f32_file(dir + "/ref_logits_yarn.f32");
  const std::vector<int32_t> prompt = test::fixture_prompt(test::fixture_forms({"qwen3"}).front());
  std::vector<int32_t> ids;
  while (ids.size() < 96) ids.insert(ids.end(), prompt.begin(), prompt.end());
  ids.resize(96);
  const auto V = static_cast<int64_t>(ref.size() / ids.size());
  const std::string gguf =
      with_keys(fixture_gguf("qwen3"),
                {{"qwen3.rope.scaling.type", gguf_string("yarn")},
                 {"qwen3.rope.scaling.factor", gguf_float(GgufType::F32, 4)},
                 {"qwen3.rope.scaling.original_context_length", gguf_int(GgufType::U32, 32)}},
                "qwen3-yarn");
  for (const bool decode : {false, true}) {
    const auto c = test::compare_logits(
        test::run_logits(gguf, ids, {.batch = 64, .decode = decode, .ctx = 128}), ref, V);
    EXPECT_LE(c.rel, 1e-4) << (decode ? "decode: " : "prefill: ") << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
  const auto plain = test::compare_logits(
      test::run_logits(fixture_gguf("qwen3"), ids, {.batch = 64, .ctx = 128}), ref, V);
  EXPECT_GT(plain.rel, 1e-2) << "plain rope is as close: the reference would not tell";
  const std::string hf = test::shared_path("fixtures/qwen3/hf");
  TS_REQUIRE_SHARED(hf);
  const std::string hf_dir = hf_with_rope(
      hf, "qwen3-yarn-hf", "",
      {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}});
  const auto c = test::compare_logits(test::run_logits(hf_dir, ids, {.ctx = 128}), ref, V);
  EXPECT_LE(c.rel, 1e-4) << "HF form: " << c.summary();
}

}  // namespace
}  // namespace ts

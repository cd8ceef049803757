// DeepSeek-V3 (MLA, group-limited routing): a configuration whose latent sizes, groups or scaling
// do not add up is refused at open with one error naming the field (the fixture's GGUF rewritten
// with one bad value or one tensor left out each); the cache holds one latent + rope row a token
// per layer, and the footprint, the sequence's cache and `inspect` say so.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/model_spec.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "test_paths.h"

namespace ts {
namespace {

// The fixture's GGUF, from the shared data (or "" without it: the tests skip).
std::string fixture_gguf() {
  return test::fixture_file("deepseek_v3", "model-f32.gguf");
}

class MlaConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string gguf = fixture_gguf();
    TS_REQUIRE_SHARED(gguf);
  }
};
class MlaCache : public MlaConfig {};

using Edit = std::function<bool(const std::string& key, GgufWriter& w)>;

// The fixture rewritten: each metadata entry through `edit` (true: it wrote or dropped the entry
// itself), every tensor but `drop`.
std::string rewritten(const Edit& edit, const std::string& drop = "") {
  const auto in = GgufFile::open(fixture_gguf());
  GgufWriter w;
  for (const auto& [key, value] : in->metadata())
    if (!edit(key, w)) w.add_kv(key, value);
  for (const GgufTensor& t : in->tensors())
    if (t.name != drop) w.add_tensor(t.name, t.dtype, t.dims, in->tensor_data(t), t.nbytes);
  const std::string path = test::scratch_path("deepseek_v3-edited.gguf");
  w.write(path);
  return path;
}

Edit unchanged() {
  return [](const std::string&, GgufWriter&) { return false; };
}

Edit set_u32(const std::string& target, int64_t v) {
  return [=](const std::string& key, GgufWriter& w) {
    if (key != "deepseek2." + target) return false;
    w.add_kv(key, gguf_int(GgufType::U32, v));
    return true;
  };
}

Edit set_f32(const std::string& target, double v) {
  return [=](const std::string& key, GgufWriter& w) {
    if (key != "deepseek2." + target) return false;
    w.add_kv(key, gguf_float(GgufType::F32, v));
    return true;
  };
}

TEST_F(MlaConfig, FixtureReadsAsDeepSeekV3) {
  const auto spec = open_model_spec(rewritten(unchanged()));
  const ArchConfig& c = spec->cfg;
  EXPECT_EQ(c.family, Family::DeepSeek2);
  EXPECT_EQ(c.mla.q_lora_rank, 32);
  EXPECT_EQ(c.mla.kv_lora_rank, 32);
  EXPECT_EQ(c.mla.qk_nope_head_dim, 32);
  EXPECT_EQ(c.mla.qk_rope_head_dim, 16);
  EXPECT_EQ(c.mla.v_head_dim, 32);
  EXPECT_EQ(c.layer_mixer, std::vector<MixerKind>(3, MixerKind::Mla));
  EXPECT_EQ(c.layer_moe, (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(c.router, RouterScoring::SigmoidGroupTopk);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  EXPECT_FLOAT_EQ(c.routed_scale, 2.5f);
  EXPECT_EQ(c.n_ff_shared, 16);
  EXPECT_EQ(c.rope_pairing, RopePairing::Adjacent);
  // DeepSeek's YaRN: the rotation unscaled, the scores by (0.1 ln 40 + 1)^2.
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.0f);
  EXPECT_NEAR(c.yarn_score_factor, std::pow(0.1 * std::log(40.0) + 1.0, 2), 1e-5);
}

TEST_F(MlaConfig, LatentAndRopeSizesMustMatchTheTensors) {
  test::expect_refused(rewritten(set_u32("attention.kv_lora_rank", 30)), "kv_lora_rank");
  test::expect_refused(rewritten(set_u32("rope.dimension_count", 14)), "qk_rope_head_dim");
  test::expect_refused(rewritten(set_u32("rope.dimension_count", 15)), "qk_rope_head_dim");
  test::expect_refused(rewritten(set_u32("attention.q_lora_rank", 16)), "q_lora_rank");
  test::expect_refused(rewritten(set_u32("attention.value_length_mla", 16)), "v_head_dim");
  test::expect_refused(rewritten(unchanged(), "blk.1.attn_k_b.weight"),
                       "missing tensor 'blk.1.attn_k_b.weight'");
}

TEST_F(MlaConfig, GroupsMustHoldTheChoice) {
  test::expect_refused(rewritten(set_u32("expert_group_used_count", 5)), "topk_group 5");
  test::expect_refused(rewritten(set_u32("expert_group_count", 3)), "n_group 3 does not divide");
  // Two kept groups of two experts hold four.
  test::expect_refused(rewritten(set_u32("expert_used_count", 5)),
                       "expert_used_count 5 is more than");
  test::expect_refused(rewritten(set_f32("expert_weights_scale", 0)), "routed_scaling_factor");
  test::expect_refused(rewritten(set_f32("expert_weights_scale", -2.5)), "routed_scaling_factor");
  // Softmax gating (DeepSeek-V2's) and an absent gating function are refused, not guessed.
  test::expect_refused(rewritten(set_u32("expert_gating_func", 1)), "expert_gating_func");
  const Edit no_gating = [](const std::string& key, GgufWriter&) {
    return key == "deepseek2.expert_gating_func";
  };
  test::expect_refused(rewritten(no_gating), "expert_gating_func");
}

TEST_F(MlaConfig, HfScoringAndMethodAreChecked) {
  const std::string shared = test::shared_path("fixtures/deepseek_v3/hf");
  if (shared.empty()) GTEST_SKIP() << "shared fixtures absent";
  const std::string dir = test::scratch_path("deepseek_v3-hf");
  std::filesystem::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.model", "tokenizer_config.json"})
    std::filesystem::copy_file(shared + "/" + f, dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(shared + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  const auto with = [&](const char* key, const nlohmann::json& v) {
    nlohmann::json c = config;
    c[key] = v;
    std::ofstream(dir + "/config.json") << c.dump();
    return dir;
  };
  EXPECT_NO_THROW(open_model_spec(with("scoring_func", "sigmoid")));
  test::expect_refused(with("scoring_func", "softmax"), "scoring_func");
  test::expect_refused(with("topk_method", "greedy"), "topk_method");
  test::expect_refused(with("topk_group", 0), "topk_group 0");
  test::expect_refused(with("routed_scaling_factor", 0), "routed_scaling_factor");
}

// The point of MLA: kv_lora_rank + qk_rope_head_dim values a token a layer, whatever the heads.
TEST_F(MlaCache, BytesPerTokenAreTheLatentAndRopeRow) {
  const std::string path = fixture_gguf();
  constexpr int64_t kCtx = 64, kLayers = 3, kRow = 32 + 16;
  for (DType kv : {DType::F32, DType::F16, DType::BF16}) {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = kCtx;
    o.kv_type = kv;
    const auto engine = Engine::open(path, o);
    const uint64_t per_token = kRow * kLayers * (kv == DType::F32 ? 4 : 2);
    EXPECT_EQ(kv_bytes_per_token(engine->cfg(), kv), per_token) << dtype_name(kv);
    EXPECT_EQ(engine->footprint().kv_cache, per_token * kCtx) << dtype_name(kv);
    const KvCache cache(*engine, kCtx);
    EXPECT_EQ(cache.bytes(), per_token * kCtx) << dtype_name(kv);
    EXPECT_EQ(cache.layer(0).width, kRow);
  }
  std::string out;
  ASSERT_EQ(test::run_command(test::binary_path() + " inspect --json -c 64 " + path, &out), 0)
      << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["per_sequence"]["kv_bytes_per_token"], kRow * kLayers * 2);  // f16, the default
  EXPECT_EQ(j["arch"]["mla"]["cache_row"], kRow);
  ASSERT_EQ(test::run_command(test::binary_path() + " inspect -c 64 " + path, &out), 0) << out;
  EXPECT_NE(out.find("MMM"), std::string::npos) << out;
  EXPECT_NE(out.find("288 bytes a token"), std::string::npos) << out;
}

// The decode path of a copied sequence starts from the copied latent rows: the same logits as
// the sequence it was copied from.
TEST_F(MlaCache, CopiedRowsDecodeAlike) {
  const std::string path = fixture_gguf();
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  const auto engine = Engine::open(path, o);
  Forward fwd(*engine, 16);
  const std::vector<int32_t> prompt = {1, 349, 2254, 1104, 630, 763, 4050, 448};
  const int64_t V = engine->cfg().n_vocab;
  KvCache a(*engine, 64), b(*engine, 64);
  std::vector<float> la(static_cast<size_t>(V)), lb(la.size());
  fwd.run({SeqChunk{.kv = &a, .tokens = prompt.data(), .n = 8, .logits = la.data()}});
  ASSERT_EQ(b.copy_rows_from(a, 8), 8);
  const int32_t next = 1525;
  fwd.run({SeqChunk{.kv = &a, .tokens = &next, .n = 1, .logits = la.data()}});
  fwd.run({SeqChunk{.kv = &b, .tokens = &next, .n = 1, .logits = lb.data()}});
  EXPECT_EQ(la, lb);
}

}  // namespace
}  // namespace ts

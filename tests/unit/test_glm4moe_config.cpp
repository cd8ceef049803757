// GLM-4.5 (glm4moe) and Kimi K2's configuration: the repository's glm4_moe fixture reads as GLM
// (its GGUF's MTP block not counted as a layer), its routing's groups and scale are checked at
// open with the field named, GLM-5's DSA is refused by name, and Kimi K2's config.json as it
// ships reads as DeepSeek-V3 with its own sizes.
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
#include "model/family.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "test_paths.h"

namespace ts {
namespace {

std::string fixture() {
  return test::fixtures_dir() + "/models/glm4_moe";
}

using Edit = std::function<bool(const std::string& key, GgufWriter& w)>;

// The fixture's GGUF rewritten: each metadata entry through `edit` (true: it wrote or dropped the
// entry itself), every tensor but `drop`.
std::string rewritten(const Edit& edit, const std::string& drop = "") {
  const auto in = GgufFile::open(fixture() + "/model-f32.gguf");
  GgufWriter w;
  for (const auto& [key, value] : in->metadata())
    if (!edit(key, w)) w.add_kv(key, value);
  for (const GgufTensor& t : in->tensors())
    if (t.name != drop) w.add_tensor(t.name, t.dtype, t.dims, in->tensor_data(t), t.nbytes);
  const std::string path = test::scratch_path("glm4_moe-edited.gguf");
  w.write(path);
  return path;
}

Edit set(const std::string& target, const GgufValue& v) {
  return [=](const std::string& key, GgufWriter& w) {
    if (key != "glm4moe." + target) return false;
    w.add_kv(key, v);
    return true;
  };
}

Edit set_u32(const std::string& target, int64_t v) {
  return set(target, gguf_int(GgufType::U32, v));
}

void expect_glm(const ArchConfig& c) {
  EXPECT_EQ(c.family, Family::Glm4Moe);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.layer_moe, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.rope_pairing, RopePairing::NeoX);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.qk_norm, QkNorm::PerHead);
  EXPECT_EQ(c.router, RouterScoring::SigmoidGroupTopk);
  EXPECT_TRUE(c.router_bias);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.n_group, 2);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_FLOAT_EQ(c.routed_scale, 2.5f);
  EXPECT_EQ(c.n_ff_shared, 8);
}

TEST(Glm4MoeConfig, FixtureReadsAsGlmInBothForms) {
  const auto gguf =
      open_model_spec(rewritten([](const std::string&, GgufWriter&) { return false; }));
  expect_glm(gguf->cfg);
  expect_glm(open_model_spec(fixture() + "/hf")->cfg);
}

TEST(Glm4MoeConfig, MtpLayersMustLeaveADecoder) {
  test::expect_refused(rewritten(set_u32("nextn_predict_layers", 3)),
                       "'nextn_predict_layers': 3 is not within [0, block_count 3)");
}

TEST(Glm4MoeConfig, GroupsAndScaleAreChecked) {
  test::expect_refused(rewritten(set_u32("expert_group_used_count", 3)), "topk_group 3");
  test::expect_refused(rewritten(set_u32("expert_group_count", 3)), "n_group 3 does not divide");
  // One kept group of four experts cannot hold five.
  test::expect_refused(rewritten(set_u32("expert_used_count", 5)),
                       "expert_used_count 5 is more than the 4 experts");
  test::expect_refused(rewritten(set("expert_weights_scale", gguf_float(GgufType::F32, 0))),
                       "routed_scaling_factor");
  test::expect_refused(rewritten(set("expert_weights_scale", gguf_float(GgufType::F32, -1))),
                       "routed_scaling_factor");
}

TEST(Glm4MoeConfig, EveryLayerHasTheFirstLayersBiasesAndNorms) {
  const Edit same = [](const std::string&, GgufWriter&) { return false; };
  test::expect_refused(rewritten(same, "blk.1.attn_q.bias"), "missing tensor 'blk.1.attn_q.bias'");
  test::expect_refused(rewritten(same, "blk.1.attn_k_norm.weight"),
                       "missing tensor 'blk.1.attn_k_norm.weight'");
}

// A directory holding `config` and a safetensors file without tensors.
std::string config_dir(const std::string& name, const nlohmann::json& config) {
  const std::string dir = test::scratch_path(name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump();
  std::ofstream st(dir + "/model.safetensors", std::ios::binary);
  const std::string header = "{}      ";
  const uint64_t n = header.size();
  st.write(reinterpret_cast<const char*>(&n), 8);
  st << header;
  return dir;
}

TEST(Glm4MoeConfig, Glm5DsaIsRefusedByName) {
  const auto source =
      ModelSource::open(config_dir("glm5-dsa", {{"architectures", {"GlmMoeDsaForCausalLM"}}}));
  try {
    read_arch_config(*source);
    FAIL() << "read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("GLM-5's DSA (sparse) attention is not supported"),
              std::string::npos)
        << e.what();
  }
}

// moonshotai/Kimi-K2-Instruct's config.json, as it ships (its auto_map and training-only keys
// left out).
const char* const kKimiK2Config = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
  "bos_token_id": 163584, "eos_token_id": 163585, "first_k_dense_replace": 1,
  "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 131072, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 64, "num_nextn_predict_layers": 0, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 163840,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]}
})";

TEST(KimiK2Config, ReadsAsDeepSeekV3WithItsSizes) {
  const auto source =
      ModelSource::open(config_dir("kimi-k2", nlohmann::json::parse(kKimiK2Config)));
  const ArchConfig c = read_arch_config(*source);
  EXPECT_NO_THROW(validate_arch(c, "kimi-k2"));
  EXPECT_EQ(c.family, Family::DeepSeek2);
  EXPECT_EQ(c.n_layer, 61);
  EXPECT_EQ(c.n_head, 64);
  EXPECT_EQ(c.n_expert, 384);
  EXPECT_EQ(c.n_expert_used, 8);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_FLOAT_EQ(c.routed_scale, 2.827f);
  EXPECT_EQ(c.n_ff_shared, 2048);
  EXPECT_EQ(c.layer_moe[0], 0);
  EXPECT_EQ(c.layer_moe[60], 1);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.rope_factor, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_beta_fast, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_beta_slow, 1.0f);
  EXPECT_EQ(c.rope_orig_ctx, 4096);
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.0f);
  EXPECT_NEAR(c.yarn_score_factor, std::pow(0.1 * std::log(32.0) + 1.0, 2), 1e-5);
}

}  // namespace
}  // namespace ts

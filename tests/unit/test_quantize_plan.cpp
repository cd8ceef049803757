// plan_quantize's per-tensor types for llama.cpp's mixes (llama-quant.cpp's rules) on small
// models written here: attn_v / ffn_down upgraded by layer position, output q6_k, the 8-expert
// rules, the imatrix-dependent rules, row fallbacks; and q2_k_s refused without an imatrix.
// Every row is 256 long (whole k-quant blocks) unless a test says otherwise; the files have few
// rows, as the plan reads only names, shapes and metadata.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/quantize_model.h"
#include "test_paths.h"

namespace ts {
namespace {

struct Shape {
  int layers = 8;
  int experts = 0;
  int heads = 4;
  int kv_heads = 1;
  bool tied = false;
  uint64_t ffn_down_row = 256;
};

// A llama-architecture GGUF of f16 zeros with the tensors llama.cpp's rules look at.
std::string write_model(const std::string& name, const Shape& s) {
  GgufWriter w;
  w.add_kv("general.architecture", gguf_string("llama"));
  w.add_kv("llama.block_count", gguf_int(GgufType::U32, s.layers));
  w.add_kv("llama.attention.head_count", gguf_int(GgufType::U32, s.heads));
  w.add_kv("llama.attention.head_count_kv", gguf_int(GgufType::U32, s.kv_heads));
  if (s.experts > 0) w.add_kv("llama.expert_count", gguf_int(GgufType::U32, s.experts));
  const auto add = [&](const std::string& n, std::vector<uint64_t> dims) {
    uint64_t elems = 1;
    for (uint64_t d : dims) elems *= d;
    const std::vector<uint16_t> zeros(elems, 0);
    w.add_tensor(n, DType::F16, std::move(dims), zeros.data(), elems * 2);
  };
  add("token_embd.weight", {256, 4});
  add("output_norm.weight", {256});
  if (!s.tied) add("output.weight", {256, 4});
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {256});
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output"})
      add(b + t + ".weight", {256, 2});
    if (s.experts > 0) {
      const auto e = static_cast<uint64_t>(s.experts);
      add(b + "ffn_gate_inp.weight", {256, e});
      add(b + "ffn_gate_exps.weight", {256, 2, e});
      add(b + "ffn_up_exps.weight", {256, 2, e});
      add(b + "ffn_down_exps.weight", {s.ffn_down_row, 2, e});
    } else {
      add(b + "ffn_gate.weight", {256, 2});
      add(b + "ffn_up.weight", {256, 2});
      add(b + "ffn_down.weight", {s.ffn_down_row, 2});
    }
  }
  const std::string path = test::scratch_path(name + ".gguf");
  w.write(path);
  return path;
}

const QuantizeType& type_named(const std::string& name) {
  for (const QuantizeType& t : quantize_types())
    if (t.name == name) return t;
  throw std::runtime_error("no quantize type " + name);
}

std::map<std::string, std::string> plan_types(const std::string& path, const std::string& type,
                                              bool imatrix = false) {
  const auto f = GgufFile::open(path);
  std::map<std::string, std::string> m;
  for (const QuantizePlanEntry& e : plan_quantize(*f, type_named(type), imatrix))
    m[e.name] = dtype_name(e.to);
  return m;
}

// The type per layer of blk.N.<tensor>.
std::vector<std::string> by_layer(const std::map<std::string, std::string>& plan,
                                  const std::string& tensor, int layers) {
  std::vector<std::string> v;
  for (int l = 0; l < layers; ++l) v.push_back(plan.at("blk." + std::to_string(l) + "." + tensor));
  return v;
}

using Types = std::vector<std::string>;

// 8 layers: llama.cpp's "more bits" layers are 0, 3, 6 and 7 (the first and last eighth and
// every third between).
TEST(QuantizePlan, KQuantMixesUpgradeAttnVAndFfnDownByLayer) {
  const std::string m = write_model("plan_dense", {});
  const auto q4km = plan_types(m, "q4_k_m");
  const Types more_q6 = {"q6_k", "q4_k", "q4_k", "q6_k", "q4_k", "q4_k", "q6_k", "q6_k"};
  EXPECT_EQ(by_layer(q4km, "attn_v.weight", 8), more_q6);
  EXPECT_EQ(by_layer(q4km, "ffn_down.weight", 8), more_q6);
  EXPECT_EQ(by_layer(q4km, "attn_q.weight", 8), Types(8, "q4_k"));
  EXPECT_EQ(q4km.at("output.weight"), "q6_k");
  EXPECT_EQ(q4km.at("token_embd.weight"), "q4_k");
  EXPECT_EQ(q4km.at("blk.0.attn_norm.weight"), "f16");

  const auto q5km = plan_types(m, "q5_k_m");
  EXPECT_EQ(by_layer(q5km, "ffn_down.weight", 8),
            Types({"q6_k", "q5_k", "q5_k", "q6_k", "q5_k", "q5_k", "q6_k", "q6_k"}));
  EXPECT_EQ(q5km.at("blk.1.ffn_up.weight"), "q5_k");

  const auto q4ks = plan_types(m, "q4_k_s");
  EXPECT_EQ(by_layer(q4ks, "attn_v.weight", 8),
            Types({"q5_k", "q5_k", "q5_k", "q5_k", "q4_k", "q4_k", "q4_k", "q4_k"}));
  EXPECT_EQ(by_layer(q4ks, "ffn_down.weight", 8),
            Types({"q5_k", "q4_k", "q4_k", "q4_k", "q4_k", "q4_k", "q4_k", "q4_k"}));

  const auto q3km = plan_types(m, "q3_k_m");
  EXPECT_EQ(by_layer(q3km, "attn_v.weight", 8),
            Types({"q5_k", "q5_k", "q4_k", "q4_k", "q4_k", "q4_k", "q4_k", "q4_k"}));
  EXPECT_EQ(by_layer(q3km, "ffn_down.weight", 8), Types(8, "q4_k"));
  EXPECT_EQ(q3km.at("blk.2.attn_output.weight"), "q4_k");
  EXPECT_EQ(q3km.at("blk.2.ffn_gate.weight"), "q3_k");

  const auto q3kl = plan_types(m, "q3_k_l");
  EXPECT_EQ(q3kl.at("blk.5.attn_v.weight"), "q5_k");
  EXPECT_EQ(q3kl.at("blk.5.ffn_down.weight"), "q5_k");
  EXPECT_EQ(q3kl.at("blk.5.attn_output.weight"), "q5_k");

  const auto q3ks = plan_types(m, "q3_k_s");
  EXPECT_EQ(q3ks.at("blk.0.attn_v.weight"), "q3_k");
  EXPECT_EQ(q3ks.at("blk.0.ffn_down.weight"), "q3_k");
  EXPECT_EQ(q3ks.at("output.weight"), "q6_k");

  // 4 heads per KV head: q2_k's attn_v is q4_k (q3_k with fewer).
  const auto q2k = plan_types(m, "q2_k");
  EXPECT_EQ(q2k.at("blk.4.attn_v.weight"), "q4_k");
  EXPECT_EQ(q2k.at("blk.4.ffn_down.weight"), "q3_k");
  EXPECT_EQ(q2k.at("blk.4.attn_output.weight"), "q3_k");
  EXPECT_EQ(q2k.at("blk.4.attn_k.weight"), "q2_k");
  const std::string few_kv = write_model("plan_dense_gqa2", {.kv_heads = 2});
  EXPECT_EQ(plan_types(few_kv, "q2_k").at("blk.4.attn_v.weight"), "q3_k");
}

TEST(QuantizePlan, ImatrixChangesTheIq4AndQ4_0FfnDownRules) {
  const std::string m = write_model("plan_dense", {});
  const auto iq4xs = plan_types(m, "iq4_xs");
  EXPECT_EQ(iq4xs.at("blk.0.ffn_down.weight"), "q5_k");
  EXPECT_EQ(iq4xs.at("blk.1.ffn_down.weight"), "iq4_xs");
  EXPECT_EQ(iq4xs.at("blk.3.attn_v.weight"), "q5_k");  // 4 heads per KV head
  EXPECT_EQ(plan_types(m, "iq4_xs", true).at("blk.0.ffn_down.weight"), "iq4_xs");
  EXPECT_EQ(plan_types(m, "iq4_nl").at("blk.0.ffn_down.weight"), "q5_k");
  EXPECT_EQ(plan_types(m, "q4_0").at("blk.0.ffn_down.weight"), "q4_0");
  EXPECT_EQ(plan_types(m, "q4_0", true).at("blk.0.ffn_down.weight"), "q4_1");
  EXPECT_EQ(plan_types(m, "q5_0", true).at("blk.0.ffn_down.weight"), "q5_1");
  EXPECT_EQ(plan_types(m, "q5_0", true).at("blk.1.ffn_down.weight"), "q5_0");
}

// Eight experts: attn_k / attn_v q8_0, attn_output q5_k; ffn_down by the layer in its name;
// rows of 384 fall back (q4_k -> q5_0, q6_k -> q8_0).
TEST(QuantizePlan, EightExpertRulesAndFallbacks) {
  const std::string m =
      write_model("plan_moe", {.layers = 4, .experts = 8, .heads = 8, .kv_heads = 4});
  const auto q4km = plan_types(m, "q4_k_m");
  EXPECT_EQ(by_layer(q4km, "attn_v.weight", 4), Types(4, "q8_0"));
  EXPECT_EQ(by_layer(q4km, "attn_k.weight", 4), Types(4, "q8_0"));
  EXPECT_EQ(by_layer(q4km, "attn_output.weight", 4), Types(4, "q5_k"));
  EXPECT_EQ(by_layer(q4km, "ffn_down_exps.weight", 4), Types({"q4_k", "q4_k", "q6_k", "q6_k"}));
  EXPECT_EQ(q4km.at("blk.0.ffn_gate_inp.weight"), "f16");
  EXPECT_EQ(plan_types(m, "q5_k_s").at("blk.0.attn_output.weight"), "q5_k");
  EXPECT_EQ(plan_types(m, "q3_k_l").at("blk.0.attn_output.weight"), "q3_k");

  const std::string odd = write_model(
      "plan_moe_384", {.layers = 4, .experts = 8, .heads = 8, .kv_heads = 4, .ffn_down_row = 384});
  EXPECT_EQ(by_layer(plan_types(odd, "q4_k_m"), "ffn_down_exps.weight", 4),
            Types({"q5_0", "q5_0", "q8_0", "q8_0"}));
  EXPECT_EQ(plan_types(odd, "iq4_xs").at("blk.1.ffn_down_exps.weight"), "iq4_nl");
}

TEST(QuantizePlan, TiedOutputIsTheTokenEmbedding) {
  const std::string m = write_model("plan_tied", {.tied = true});
  EXPECT_EQ(plan_types(m, "q4_k_m").at("token_embd.weight"), "q6_k");
  EXPECT_EQ(plan_types(m, "q8_0").at("token_embd.weight"), "q8_0");
}

TEST(QuantizePlan, Q2KSNeedsAnImatrix) {
  const std::string m = write_model("plan_dense", {});
  const auto f = GgufFile::open(m);
  try {
    write_quantized(*f, type_named("q2_k_s"), nullptr, test::scratch_path("q2ks.gguf"), 1, {});
    FAIL() << "q2_k_s was written without an imatrix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q2_k_s needs an importance matrix"), std::string::npos)
        << e.what();
  }
  // Its rules with one: attn_v q4_k (4 heads per KV head), the first eighth's ffn_down q4_k.
  const auto q2ks = plan_types(m, "q2_k_s", true);
  EXPECT_EQ(q2ks.at("blk.5.attn_v.weight"), "q4_k");
  EXPECT_EQ(q2ks.at("blk.0.ffn_down.weight"), "q4_k");
  EXPECT_EQ(q2ks.at("blk.1.ffn_down.weight"), "q2_k");
}

}  // namespace
}  // namespace ts

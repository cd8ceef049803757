// nomic-bert (nomic-embed-text v1 / v1.5's architecture: BERT's encoder with rotary q / k, a
// SwiGLU FFN and no projection biases) on the nomic_bert fixture
// (tools/reference/make_nomic_bert_fixture.py): its GGUF (llama.cpp's converter), its directory in
// nomic-ai's layout and the same weights in transformers' layout give transformers'
// NomicBertModel's mean-pooled, normalised vectors and first-token states. What the family does
// not build is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/error.h"
#include "encoder_references.h"
#include "fixture_models.h"
#include "formats_test_util.h"
#include "model/family.h"
#include "model/model_source.h"
#include "model/pooling.h"
#include "runtime/embedding.h"
#include "runtime/encoder.h"
#include "runtime/model_tokenizer.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/nomic_bert/" + file;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

// The fixture's directory with `change` applied to its config.json (nomic-ai's keys), in a
// scratch directory of `name`.
std::string hf_with_config(const std::string& name, const std::function<void(json&)>& change) {
  const std::string dir = test::scratch_path(name);
  fs::remove_all(dir);
  fs::copy(fixture("hf"), dir, fs::copy_options::recursive);
  json config = read_json(dir + "/config.json");
  change(config);
  test::write_file(dir + "/config.json", config.dump(1));
  return dir;
}

// The fixture's weights as transformers' save_pretrained writes a NomicBertModel: q, k and v
// apart, its own names and config keys.
std::string transformers_layout() {
  const std::string dir = test::scratch_path("nomic-transformers-layout");
  fs::remove_all(dir);
  fs::copy(fixture("hf"), dir, fs::copy_options::recursive);
  const auto src = ModelSource::open(fixture("hf"));
  json header = json::object();
  std::vector<uint8_t> data;
  const auto put = [&](const std::string& name, const TensorRef& t, uint64_t row0, uint64_t rows) {
    const uint64_t row_bytes = t.nbytes / static_cast<uint64_t>(t.rows());
    const uint8_t* from = t.data() + row0 * row_bytes;
    const json shape = t.dims.size() == 1 ? json{t.dims[0]} : json{rows, t.dims[0]};
    header[name] = {{"dtype", "F32"},
                    {"shape", shape},
                    {"data_offsets", {data.size(), data.size() + rows * row_bytes}}};
    data.insert(data.end(), from, from + rows * row_bytes);
  };
  const auto same = [&](const std::string& to, const std::string& from) {
    const TensorRef t = *src->find(from);
    put(to, t, 0, static_cast<uint64_t>(t.rows()));
  };
  same("embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight");
  same("embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight");
  for (const char* p : {"weight", "bias"})
    same(std::string("embeddings.LayerNorm.") + p, std::string("emb_ln.") + p);
  for (int l = 0; l < 2; ++l) {
    const std::string to = "layers." + std::to_string(l) + ".";
    const std::string from = "encoder.layers." + std::to_string(l) + ".";
    const TensorRef qkv = *src->find(from + "attn.Wqkv.weight");
    for (int i = 0; i < 3; ++i)
      put(to + "self_attn." + "qkv"[i] + "_proj.weight", qkv, 32u * static_cast<uint64_t>(i), 32);
    same(to + "self_attn.o_proj.weight", from + "attn.out_proj.weight");
    same(to + "mlp.up_proj.weight", from + "mlp.fc11.weight");
    same(to + "mlp.gate_proj.weight", from + "mlp.fc12.weight");
    same(to + "mlp.down_proj.weight", from + "mlp.fc2.weight");
    for (const char* p : {"weight", "bias"}) {
      same(to + "post_attention_layernorm." + p, from + "norm1." + p);
      same(to + "post_mlp_layernorm." + p, from + "norm2." + p);
    }
  }
  test::write_file(dir + "/model.safetensors", test::safetensors_bytes(header.dump(), data));
  const json config = {{"architectures", {"NomicBertModel"}},
                       {"model_type", "nomic_bert"},
                       {"hidden_size", 32},
                       {"num_hidden_layers", 2},
                       {"num_attention_heads", 4},
                       {"intermediate_size", 64},
                       {"max_position_embeddings", 2048},
                       {"vocab_size", 300},
                       {"type_vocab_size", 2},
                       {"layer_norm_eps", 1e-12},
                       {"hidden_act", "silu"},
                       {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1000.0}}}};
  test::write_file(dir + "/config.json", config.dump(1));
  return dir;
}

void expect_references(const std::string& path, const EmbeddingSpec& spec, const char* key,
                       float tol) {
  test::expect_encoder_references(path, read_json(fixture("ref.json")), spec, key, tol);
}

TEST(NomicBertEmbedding, ConfigIsARotarySwiGluEncoder) {
  for (const std::string& path :
       {fixture("model-f32.gguf"), fixture("hf"), transformers_layout()}) {
    const ArchConfig c = read_arch_config(*ModelSource::open(path));
    EXPECT_EQ(c.family, Family::NomicBert) << path;
    EXPECT_EQ(c.stack, LayerStack::Encoder);
    EXPECT_EQ(c.encoder.positions, EncoderPositions::Rotary);
    EXPECT_EQ(c.encoder.ffn, EncoderFfn::SwiGlu);
    EXPECT_FALSE(c.encoder.biases);
    EXPECT_EQ(c.encoder.n_positions, 2048) << path;  // trained on 2048 of the 8192 stated
    EXPECT_EQ(c.n_embd, 32);
    EXPECT_EQ(c.n_layer, 2);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.rotary_dim, 8);
    EXPECT_EQ(c.n_ff, 64);
    EXPECT_FLOAT_EQ(c.rope_theta, 1000.0f);
    EXPECT_FLOAT_EQ(c.encoder.norm_eps, 1e-12f);
  }
}

// The bounds are f32's noise here: measured 4.2e-7 on the normalised vectors and 4.2e-6 on the
// first-token states (elements up to 2.9); llama.cpp's error on the same GGUF is 3.3e-7 and 6.0e-6.
TEST(NomicBertEmbedding, EveryFormMatchesTransformers) {
  for (const std::string& path :
       {fixture("model-f32.gguf"), fixture("hf"), transformers_layout()}) {
    const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(path));
    EXPECT_EQ(spec.pooling, Pooling::Mean) << path;
    EXPECT_TRUE(spec.normalize) << path;
    expect_references(path, spec, "embeddings", 6e-7f);
    expect_references(path, {Pooling::Cls, false, ""}, "cls", 6e-6f);
  }
}

// The three forms hold the same f32 weights: the same hidden states, bit for bit.
TEST(NomicBertEmbedding, FormsGiveTheSameBits) {
  const std::vector<int32_t> ids = read_json(fixture("ref.json"))["ids"][4];
  const std::vector<float> gguf = Encoder::open(fixture("model-f32.gguf"), "cpu", 2)->hidden(ids);
  EXPECT_EQ(Encoder::open(fixture("hf"), "cpu", 2)->hidden(ids), gguf);
  EXPECT_EQ(Encoder::open(transformers_layout(), "cpu", 2)->hidden(ids), gguf);
}

// Texts encoded together get the vectors each gets alone, bit for bit: each text's positions
// start at 0 however many rows come before it.
TEST(NomicBertEmbedding, TextsBatchedGiveEachTheirOwnVector) {
  const json ref = read_json(fixture("ref.json"));
  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "cpu", 2);
  std::vector<std::vector<int32_t>> texts;
  for (const json& ids : ref["ids"]) texts.push_back(ids.get<std::vector<int32_t>>());
  texts.push_back(texts[4]);
  Pooler pooler(read_embedding_spec(encoder->source()), encoder->cfg().n_embd);
  const std::vector<std::vector<float>> batched = encoder->embed(texts, pooler);
  ASSERT_EQ(batched.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(batched[i], encoder->embed(texts[i], pooler)) << "text " << i;
}

// A pass's workspace counts the split states the attention keeps on the calling thread: after the
// text that keeps the most (one block of rows), exactly what full_attention_kept_bytes says.
TEST(NomicBertEmbedding, WorkspaceCountsTheAttentionsKeptStates) {
  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "cpu", 2);
  const ArchConfig& c = encoder->cfg();
  AttentionArgs a;
  a.n_head = a.n_head_kv = c.n_head;
  a.head_dim = c.head_dim;
  const uint64_t kept = cpu::full_attention_kept_bytes(a, c.encoder.n_positions, 2);
  EXPECT_GT(kept, 0u);
  EXPECT_GE(encoder->workspace_bytes(64), kept);
  std::thread([&] {
    for (const int64_t n : {3, 64, 65, 700}) encoder->hidden(std::vector<int32_t>(n, 7));
    EXPECT_EQ(cpu::attention_kept_now(), kept);
  }).join();
}

TEST(NomicBertEmbedding, WhatItDoesNotBuildIsRefusedByName) {
  const auto refused = [](const std::string& dir, const std::string& words) {
    EXPECT_TRUE(test::throws_ts_error_any([&] { read_arch_config(*ModelSource::open(dir)); },
                                          ErrorKind::Model, {words}))
        << words;
  };
  refused(hf_with_config("nomic-moe", [](json& c) { c["moe_every_n_layers"] = 2; }),
          "nomic-bert-moe");
  refused(hf_with_config("nomic-ntk", [](json& c) { c["rotary_scaling_factor"] = 2.0; }),
          "rotary_scaling_factor");
  refused(hf_with_config("nomic-gelu", [](json& c) { c["activation_function"] = "gelu"; }),
          "'gelu' is not supported (swiglu)");
  refused(hf_with_config("nomic-prenorm", [](json& c) { c["prenorm"] = true; }), "prenorm");
  refused(hf_with_config("nomic-bias", [](json& c) { c["qkv_proj_bias"] = true; }),
          "qkv_proj_bias");
  refused(hf_with_config("nomic-partial", [](json& c) { c["rotary_emb_fraction"] = 0.5; }),
          "partial rotary");
  refused(hf_with_config("nomic-odd", [](json& c) { c["n_head"] = 32; }), "even width");

  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "cpu", 1);
  EXPECT_TRUE(test::throws_ts_error_any([&] { encoder->hidden(std::vector<int32_t>(2049, 5)); },
                                        ErrorKind::Input,
                                        {"2049 tokens exceed the encoder's 2048 positions"}));
}

}  // namespace
}  // namespace ts

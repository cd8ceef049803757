// Synthetic models: every dtype writes a file that opens, validates and runs a forward pass with
// finite logits (dense and MoE); the files are deterministic per seed, cut cleanly by --layers,
// exactly the planned size, and the real shapes have their published parameter counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/model_spec.h"
#include "model/synth_model.h"
#include "model/synth_shapes.h"
#include "quant/row_fallback.h"
#include "runtime/engine.h"
#include "runtime/footprint.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

const DType kAllTypes[] = {DType::F32,  DType::F16,    DType::BF16,   DType::Q4_0,
                           DType::Q4_1, DType::Q5_0,   DType::Q5_1,   DType::Q8_0,
                           DType::Q2_K, DType::Q3_K,   DType::Q4_K,   DType::Q5_K,
                           DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ts_synth_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& shape, DType dtype, int64_t layers = 0, uint64_t seed = 0) {
    SynthOptions o;
    o.shape = shape;
    o.dtype = dtype;
    o.layers = layers;
    o.seed = seed;
    o.threads = 2;
    const std::string path =
        (dir_ / (shape + "-" + dtype_name(dtype) + "-" + std::to_string(layers) + "-" +
                 std::to_string(seed) + ".gguf"))
            .string();
    const SynthSummary s = write_synth_model(o, path);
    EXPECT_EQ(s.file_bytes, std::filesystem::file_size(path));
    EXPECT_EQ(s.file_bytes, plan_synth_model(o).file_bytes);
    EXPECT_FALSE(std::filesystem::exists(path + ".part"));
    return path;
  }

  std::filesystem::path dir_;
};

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Logits of every position of a fixed prompt through chunked prefill (2 micro-batches).
std::vector<float> prefill_logits(const std::string& path, int64_t* vocab) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  o.prefill_batch = 8;
  auto engine = Engine::open(path, o);
  Session session(*engine);
  const std::vector<int32_t> ids = {1, 300, 301, 302, 400, 401, 402, 500, 7, 260, 511, 3};
  *vocab = engine->cfg().n_vocab;
  std::vector<float> logits(ids.size() * static_cast<size_t>(*vocab));
  session.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
  return logits;
}

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// A random-weight model's prefill logits: finite and of order 1 (neither collapsed nor blown up).
void expect_logits_of_order_one(const std::string& path) {
  int64_t vocab = 0;
  const std::vector<float> logits = prefill_logits(path, &vocab);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(max_abs(logits), 0.5);
  EXPECT_LT(max_abs(logits), 50.0);
}

TEST_F(SynthTest, EveryDtypeRunsDenseAndMoe) {
  // tiny-deepseek cut to its first layer: latent attention and a dense FFN (its MoE layer's
  // sigmoid scores sit close enough that any rounding flips choices: DeepSeekShapeRuns).
  const std::pair<const char*, int64_t> shapes[] = {
      {"tiny", 0}, {"tiny-moe", 0}, {"tiny-deepseek", 1}, {"tiny-gpt-oss", 0}};
  for (const auto& [shape, layers] : shapes) {
    int64_t vocab = 0;
    const std::vector<float> ref = prefill_logits(write(shape, DType::F32, layers), &vocab);
    ASSERT_EQ(vocab, 512);
    for (float v : ref) ASSERT_TRUE(std::isfinite(v)) << shape;
    // Random weights scaled by 1 / sqrt(fan_in) give logits of order 1: neither collapsed nor
    // blown up by the depth.
    EXPECT_GT(max_abs(ref), 0.5) << shape;
    EXPECT_LT(max_abs(ref), 50.0) << shape;
    for (DType t : kAllTypes) {
      const std::vector<float> logits = prefill_logits(write(shape, t, layers), &vocab);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << shape << " " << dtype_name(t);
      double diff = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        diff = std::max(diff, static_cast<double>(std::fabs(logits[i] - ref[i])));
      // The same random values, rounded to the dtype: close to the f32 model, closer with more
      // bits (the 2- and 3-bit types only have to stay finite and of the same order). In the MoE
      // model rounding flips some top-k choices, which moves logits by more than the rounding, so
      // only its 16- and 8-bit files are held close.
      const double rel = diff / max_abs(ref);
      std::printf("%s %s: max |logit - f32 logit| / max |f32 logit| = %.4f\n", shape, dtype_name(t),
                  rel);
      const bool moe = std::string(shape) == "tiny-moe" || std::string(shape) == "tiny-gpt-oss";
      if (t == DType::F16 || t == DType::BF16 || t == DType::Q8_0) {
        EXPECT_LT(rel, 0.05) << shape << " " << dtype_name(t);
      } else if (!moe &&
                 (t == DType::Q6_K || t == DType::Q5_K || t == DType::Q5_0 || t == DType::Q5_1)) {
        EXPECT_LT(rel, 0.2) << shape << " " << dtype_name(t);
      }
      EXPECT_LT(rel, 2.0) << shape << " " << dtype_name(t);
    }
  }
}

// The hybrid test shapes (one per architecture: qwen3next, qwen35, qwen35moe) open and run in every
// dtype: DeltaNet layers and gated attention, the shared expert, finite logits of order 1.
TEST_F(SynthTest, EveryDtypeRunsTheHybrids) {
  for (const char* shape : {"tiny-next", "tiny-hybrid", "tiny-hybrid-moe"}) {
    int64_t vocab = 0;
    const std::vector<float> ref = prefill_logits(write(shape, DType::F32), &vocab);
    ASSERT_EQ(vocab, 512);
    for (float v : ref) ASSERT_TRUE(std::isfinite(v)) << shape;
    EXPECT_GT(max_abs(ref), 0.5) << shape;
    EXPECT_LT(max_abs(ref), 50.0) << shape;
    for (DType t : kAllTypes) {
      const std::vector<float> logits = prefill_logits(write(shape, t), &vocab);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << shape << " " << dtype_name(t);
      double diff = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        diff = std::max(diff, static_cast<double>(std::fabs(logits[i] - ref[i])));
      const double rel = diff / max_abs(ref);
      std::printf("%s %s: max |logit - f32 logit| / max |f32 logit| = %.4f\n", shape, dtype_name(t),
                  rel);
      // Rounding moves these logits far more than the plain stacks' (one DeltaNet layer about as
      // much as tiny's two layers, growing with depth): each head's output is RMS-normalised,
      // so where its q.k cancels, the rounding left is scaled up with it; in the MoE shapes it
      // also flips top-k choices. f16 is held close, the dense shape's bf16 and q8_0 within half
      // the logit range, the rest finite and of the same order.
      const bool dense = std::string(shape) == "tiny-hybrid";
      if (t == DType::F16) {
        EXPECT_LT(rel, 0.05) << shape;
      }
      if (dense && (t == DType::BF16 || t == DType::Q8_0)) {
        EXPECT_LT(rel, 0.5) << dtype_name(t);
      }
      EXPECT_LT(rel, 2.0) << shape << " " << dtype_name(t);
    }
  }
}

// The keys and tensors llama.cpp's converter writes (the fixtures' meta.json lists a real file's),
// and the engine's reading of them: the layer pattern, partial rotary, the DeltaNet sizes.
TEST_F(SynthTest, HybridFilesHaveTheConvertersKeysAndTensors) {
  auto f = GgufFile::open(write("tiny-hybrid-moe", DType::Q8_0));
  EXPECT_EQ(f->get_string("general.architecture"), "qwen35moe");
  EXPECT_EQ(f->get_int("qwen35moe.ssm.conv_kernel"), 4);
  EXPECT_EQ(f->get_int("qwen35moe.ssm.state_size"), 16);
  EXPECT_EQ(f->get_int("qwen35moe.ssm.group_count"), 16);
  EXPECT_EQ(f->get_int("qwen35moe.ssm.time_step_rank"), 32);
  EXPECT_EQ(f->get_int("qwen35moe.ssm.inner_size"), 512);
  EXPECT_EQ(f->get_int("qwen35moe.full_attention_interval"), 4);
  EXPECT_EQ(f->get_int("qwen35moe.rope.dimension_count"), 16);
  EXPECT_EQ(f->get_int("qwen35moe.expert_shared_feed_forward_length"), 256);
  EXPECT_EQ(f->get_int("qwen35moe.feed_forward_length"), std::nullopt);
  ASSERT_NE(f->get_array("qwen35moe.attention.recurrent_layers"), nullptr);
  EXPECT_EQ(f->get_array("qwen35moe.attention.recurrent_layers")->ints,
            (std::vector<int64_t>{1, 1, 1, 0}));
  ASSERT_NE(f->get_array("qwen35moe.rope.dimension_sections"), nullptr);
  EXPECT_EQ(f->get_array("qwen35moe.rope.dimension_sections")->ints,
            (std::vector<int64_t>{3, 3, 2, 0}));
  const auto dtype_of = [&](const std::string& name) {
    const GgufTensor* t = f->tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->dtype : DType::Q8_K;
  };
  // What the quantiser leaves f32: 1-D tensors, the routers, the conv taps.
  for (const char* name : {"blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_norm.weight",
                           "blk.0.ssm_conv1d.weight", "blk.0.ffn_gate_inp.weight",
                           "blk.0.ffn_gate_inp_shexp.weight", "blk.0.post_attention_norm.weight"})
    EXPECT_EQ(dtype_of(name), DType::F32) << name;
  for (const char* name :
       {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_alpha.weight",
        "blk.0.ssm_beta.weight", "blk.0.ssm_out.weight", "blk.0.ffn_down_shexp.weight",
        "blk.3.attn_q.weight"})
    EXPECT_EQ(dtype_of(name), DType::Q8_0) << name;
  EXPECT_EQ(f->tensor("blk.0.ssm_conv1d.weight")->dims, (std::vector<uint64_t>{4, 1024}));
  EXPECT_EQ(f->tensor("blk.3.attn_q.weight")->dims, (std::vector<uint64_t>{256, 512}));
  EXPECT_EQ(f->tensor("blk.3.attn_qkv.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.0.ffn_norm.weight"), nullptr);
  // A is stored as -exp(A_log): negative, so the state decays.
  const GgufTensor* a = f->tensor("blk.1.ssm_a");
  const auto* av = reinterpret_cast<const float*>(f->tensor_data(*a));
  for (uint64_t i = 0; i < a->elements(); ++i) EXPECT_LT(av[i], 0.0f);

  auto spec = open_model_spec(f->path());
  EXPECT_EQ(spec->cfg.family, Family::Qwen35Moe);
  EXPECT_EQ(spec->cfg.layer_mixer,
            (std::vector<MixerKind>{MixerKind::DeltaNet, MixerKind::DeltaNet, MixerKind::DeltaNet,
                                    MixerKind::Attention}));
  EXPECT_EQ(spec->cfg.rotary_dim, 16);
  EXPECT_EQ(spec->cfg.n_ff_shared, 256);
  EXPECT_EQ(spec->cfg.delta.value_dim(), 512);

  // qwen3next: fused beta/alpha, no per-layer list (the interval says it), a dense width stated.
  auto n = GgufFile::open(write("tiny-next", DType::Q8_0));
  EXPECT_EQ(n->get_array("qwen3next.attention.recurrent_layers"), nullptr);
  EXPECT_EQ(n->get_int("qwen3next.full_attention_interval"), 2);
  EXPECT_EQ(n->get_int("qwen3next.feed_forward_length"), 512);
  ASSERT_NE(n->tensor("blk.0.ssm_ba.weight"), nullptr);
  EXPECT_EQ(n->tensor("blk.0.ssm_ba.weight")->dims, (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(n->tensor("blk.0.ssm_alpha.weight"), nullptr);
  auto next_spec = open_model_spec(n->path());
  EXPECT_EQ(next_spec->cfg.layer_mixer[1], MixerKind::Attention);
  EXPECT_EQ(next_spec->cfg.layer_mixer[2], MixerKind::DeltaNet);
}

// The whole tiny-deepseek (its MoE layer: grouped sigmoid routing, shared expert) in an 8-bit
// file: opens as DeepSeek-V3 and gives logits of order 1.
TEST_F(SynthTest, DeepSeekShapeRuns) {
  const std::string path = write("tiny-deepseek", DType::Q8_0);
  const ArchConfig c = open_model_spec(path)->cfg;
  EXPECT_EQ(c.family, Family::DeepSeek2);
  EXPECT_EQ(c.layer_moe, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(c.router, RouterScoring::SigmoidGroupTopk);
  EXPECT_EQ(c.n_ff_shared, 256);
  expect_logits_of_order_one(path);
}

// The whole tiny-glm in an 8-bit file: opens as GLM-4.5 (biases, partial rotary, grouped sigmoid
// routing, shared expert, a dense first layer) and gives logits of order 1.
TEST_F(SynthTest, GlmShapeRuns) {
  const std::string path = write("tiny-glm", DType::Q8_0);
  const ArchConfig c = open_model_spec(path)->cfg;
  EXPECT_EQ(c.family, Family::Glm4Moe);
  EXPECT_EQ(c.layer_moe, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(c.rotary_dim, 32);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.qk_norm, QkNorm::None);
  EXPECT_EQ(c.router, RouterScoring::SigmoidGroupTopk);
  EXPECT_EQ(c.n_group, 2);
  EXPECT_EQ(c.n_ff_shared, 256);
  expect_logits_of_order_one(path);
}

// tiny-gemma4 in 8-bit and 4-bit files: opens as Gemma 4 with its per-layer shapes,
// KV sharing and per-layer embeddings, and gives finite logits of order 1.
TEST_F(SynthTest, Gemma4ShapeRuns) {
  for (const DType t : {DType::Q8_0, DType::Q4_K}) {
    const std::string path = write("tiny-gemma4", t);
    const auto spec = open_model_spec(path);
    const ArchConfig& c = spec->cfg;
    EXPECT_EQ(c.family, Family::Gemma4);
    EXPECT_EQ(c.layer_head_dim, (std::vector<int64_t>{64, 64, 64, 128, 64, 64}));
    EXPECT_EQ(c.layer_kv_source, (std::vector<int32_t>{0, 1, 2, 3, 2, 2}));
    EXPECT_EQ(c.n_embd_per_layer, 256);
    EXPECT_GT(spec->mapped_bytes, 0u);
    int64_t vocab = 0;
    const std::vector<float> logits = prefill_logits(path, &vocab);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_GT(max_abs(logits), 0.5);
    EXPECT_LT(max_abs(logits), 30.0);  // the soft-cap
  }
}

// tiny-gemma4-moe: the dense FFN beside the experts, k = v on its global layer; streamed
// experts give the resident logits.
TEST_F(SynthTest, Gemma4MoeShapeRuns) {
  const std::string path = write("tiny-gemma4-moe", DType::Q8_0);
  const auto spec = open_model_spec(path);
  const ArchConfig& c = spec->cfg;
  EXPECT_TRUE(c.moe_dense_beside);
  EXPECT_TRUE(c.attn_k_eq_v);
  EXPECT_EQ(c.layer_n_head_kv, (std::vector<int64_t>{2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(spec->layers[5].get(LayerTensor::Wv), nullptr);
  int64_t vocab = 0;
  const std::vector<float> logits = prefill_logits(path, &vocab);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(max_abs(logits), 0.5);
  EXPECT_LT(max_abs(logits), 30.0);
}

// tiny-gpt-oss opens as gpt-oss (sinks, biases, every other layer sliding, YaRN) and runs; its
// mxfp4 file is llama.cpp's MXFP4_MOE: the routed experts MXFP4, every other matrix q8_0.
TEST_F(SynthTest, GptOssShapeRunsAndMxfp4IsTheMoeMix) {
  const std::string path = write("tiny-gpt-oss", DType::MXFP4);
  const ArchConfig c = open_model_spec(path)->cfg;
  EXPECT_EQ(c.family, Family::GptOss);
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.expert_bias);
  EXPECT_EQ(c.layer_sliding, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  const auto f = GgufFile::open(path);
  int experts = 0;
  for (const GgufTensor& t : f->tensors()) {
    const bool matrix = t.dims.size() >= 2 && t.name.find("ffn_gate_inp") == std::string::npos &&
                        t.name.find(".bias") == std::string::npos;
    if (!matrix) {
      EXPECT_EQ(t.dtype, DType::F32) << t.name;
    } else if (t.name.find("_exps.") != std::string::npos) {
      EXPECT_EQ(t.dtype, DType::MXFP4) << t.name;
      ++experts;
    } else {
      EXPECT_EQ(t.dtype, DType::Q8_0) << t.name;
    }
  }
  EXPECT_EQ(experts, 6);
  EXPECT_EQ(f->get_int("general.file_type"), 38);
  int64_t vocab = 0;
  const std::vector<float> logits = prefill_logits(path, &vocab);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(max_abs(logits), 0.5);
  EXPECT_LT(max_abs(logits), 50.0);
}

TEST_F(SynthTest, FileHasLlamaCppNamesMetadataAndVocab) {
  const std::string path = write("tiny-moe", DType::Q8_0);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f->get_int("general.file_type"), 7);
  EXPECT_EQ(f->get_int("qwen3moe.block_count"), 2);
  EXPECT_EQ(f->get_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(f->get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(f->get_int("qwen3moe.expert_feed_forward_length"), 256);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  ASSERT_NE(f->get_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f->get_array("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f->get_array("tokenizer.ggml.token_type")->size(), 512u);
  const GgufTensor* router = f->tensor("blk.1.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->dtype, DType::F32);
  const GgufTensor* down = f->tensor("blk.1.ffn_down_exps.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<uint64_t>{256, 256, 8}));
  EXPECT_EQ(down->dtype, DType::Q8_0);
  EXPECT_NE(f->tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_NE(f->tensor("output.weight"), nullptr);

  // The tokenizer loads and round-trips text through the byte fallback and letter pieces.
  auto spec = open_model_spec(path);
  const Tokenizer tok = load_tokenizer(*spec);
  EXPECT_EQ(tok.bos(), 1);
  const std::vector<int32_t> ids = tok.encode("hello world", false, false);
  EXPECT_FALSE(ids.empty());
  for (int32_t id : ids) EXPECT_LT(id, 512);

  // tiny: tied head (no output.weight) and llama3 rope scaling as rope_freqs divisors, from 1
  // (short wavelengths) to the factor (long ones).
  auto g = GgufFile::open(write("tiny", DType::Q8_0));
  EXPECT_EQ(g->tensor("output.weight"), nullptr);
  const GgufTensor* rf = g->tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  ASSERT_EQ(rf->dims, (std::vector<uint64_t>{32}));
  const auto* div = reinterpret_cast<const float*>(g->tensor_data(*rf));
  EXPECT_FLOAT_EQ(div[0], 1.0f);
  EXPECT_FLOAT_EQ(div[31], 8.0f);
  for (int i = 1; i < 32; ++i) EXPECT_GE(div[i], div[i - 1]);
  auto tiny_spec = open_model_spec(g->path());
  EXPECT_TRUE(tiny_spec->cfg.tied_embeddings);
  EXPECT_EQ(tiny_spec->cfg.rope_scaling, RopeScaling::Llama3);
}

TEST_F(SynthTest, SeedDecidesTheBytesAndLayersCutDepth) {
  const std::string a = write("tiny-moe", DType::Q4_K, 0, 7);
  const std::string b = write("tiny-moe", DType::Q4_K, 0, 7);
  const std::string c = write("tiny-moe", DType::Q4_K, 0, 8);
  EXPECT_EQ(file_bytes(a), file_bytes(b));
  EXPECT_NE(file_bytes(a), file_bytes(c));

  // A one-layer file holds exactly the first layer (and the global tensors) of the full one.
  const std::string cut = write("tiny-moe", DType::Q4_K, 1, 7);
  auto full = GgufFile::open(a);
  auto one = GgufFile::open(cut);
  EXPECT_EQ(one->get_int("qwen3moe.block_count"), 1);
  EXPECT_EQ(one->tensor("blk.1.attn_q.weight"), nullptr);
  for (const GgufTensor& t : one->tensors()) {
    const GgufTensor* u = full->tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(t.nbytes, u->nbytes) << t.name;
    EXPECT_EQ(0, std::memcmp(one->tensor_data(t), full->tensor_data(*u), t.nbytes)) << t.name;
  }
  EXPECT_EQ(open_model_spec(cut)->cfg.n_layer, 1);
}

// Parameter counts of the real models (from their model cards) follow from the shapes.
TEST(SynthShapes, RealShapesHaveTheirPublishedSizes) {
  struct Case {
    const char* shape;
    double billions;
  };
  for (const Case& c :
       {Case{"llama3.2-1b", 1.236}, Case{"llama3-8b", 8.030}, Case{"qwen3-8b", 8.191},
        Case{"mixtral-8x7b", 46.70}, Case{"qwen3-30b-a3b", 30.53}, Case{"deepseek-v3", 671.03},
        Case{"gpt-oss-20b", 20.91}, Case{"gpt-oss-120b", 116.83}, Case{"kimi-k2", 1026.41}}) {
    SynthOptions o;
    o.shape = c.shape;
    o.dtype = DType::Q8_0;
    const SynthSummary s = plan_synth_model(o);
    EXPECT_NEAR(static_cast<double>(s.params) / 1e9, c.billions, c.billions * 0.002) << c.shape;
  }
}

// The hybrids' model cards give rounded totals that also count the vision tower (Qwen3.5) or the
// MTP layer, which synth does not write: the text models' sums land within 1.5 % of them.
TEST(SynthShapes, HybridShapesHaveAboutTheirPublishedSizes) {
  struct Case {
    const char* shape;
    double billions;
  };
  for (const Case& c : {Case{"qwen3-next-80b-a3b", 80}, Case{"qwen3.6-35b-a3b", 35},
                        Case{"qwen3.5-397b-a17b", 397}, Case{"qwen3.5-27b", 27}}) {
    SynthOptions o;
    o.shape = c.shape;
    o.dtype = DType::Q4_K;
    o.k_m_mix = true;
    const SynthSummary s = plan_synth_model(o);
    EXPECT_NEAR(static_cast<double>(s.params) / 1e9, c.billions, c.billions * 0.015) << c.shape;
  }
}

// GLM-4.5-Air's card: 106 B parameters, rounded (synth writes no MTP layer). Its
// widths (10944, 1408) are not whole k-quant blocks: an 8-bit file.
TEST(SynthShapes, GlmAirHasAboutItsPublishedSize) {
  SynthOptions o;
  o.shape = "glm-4.5-air";
  o.dtype = DType::Q8_0;
  EXPECT_NEAR(static_cast<double>(plan_synth_model(o).params) / 1e9, 106, 106 * 0.015);
}

// Gemma 4 26B-A4B's and 31B's cards: 25.2 B and 30.7 B parameters (their shapes are uncertain,
// synth_shapes.cpp; the sums are the check).
TEST(SynthShapes, Gemma4ShapesHaveTheirPublishedSizes) {
  for (const auto& [shape, billions] :
       {std::pair<const char*, double>{"gemma4-26b-a4b", 25.2}, {"gemma4-31b", 30.7}}) {
    SynthOptions o;
    o.shape = shape;
    o.dtype = DType::Q8_0;
    EXPECT_NEAR(static_cast<double>(plan_synth_model(o).params) / 1e9, billions, billions * 0.005)
        << shape;
  }
}

// A row that is not whole blocks of the dtype takes llama.cpp's fallback (DeepSeek-V3's 128-wide
// attn_k_b under q4_k_m: q5_0), as its quantiser writes such files; f16 where no 32-element type
// divides the row.
TEST(SynthShapes, RowsThatAreNotWholeBlocksFallBackAsLlamaCppDoes) {
  EXPECT_EQ(row_fallback_dtype(DType::Q4_K, 128), DType::Q5_0);
  EXPECT_EQ(row_fallback_dtype(DType::Q4_K, 512), DType::Q4_K);
  EXPECT_EQ(row_fallback_dtype(DType::Q5_K, 1408), DType::Q5_1);
  EXPECT_EQ(row_fallback_dtype(DType::Q6_K, 96), DType::Q8_0);
  EXPECT_EQ(row_fallback_dtype(DType::IQ2_XXS, 160), DType::IQ4_NL);
  EXPECT_EQ(row_fallback_dtype(DType::Q3_K, 64), DType::Q4_0);
  EXPECT_EQ(row_fallback_dtype(DType::Q4_K, 100), DType::F16);
  EXPECT_EQ(row_fallback_dtype(DType::Q8_0, 100), DType::F16);
  SynthOptions o;
  o.shape = "deepseek-v3";
  o.layers = 4;
  o.dtype = DType::Q4_K;
  o.k_m_mix = true;
  EXPECT_GT(plan_synth_model(o).params, 0u);
}

TEST(SynthShapes, RefusesWhatItCannotWrite) {
  SynthOptions o;
  o.shape = "llama3-70b";
  EXPECT_THROW(plan_synth_model(o), Error);
  o.shape = "tiny";
  o.layers = 3;
  EXPECT_THROW(plan_synth_model(o), Error);
  o.layers = 1;
  o.dtype = DType::Q8_K;
  EXPECT_THROW(plan_synth_model(o), Error);
  o.dtype = DType::Q8_0;
  EXPECT_THROW(write_synth_model(o, "/nonexistent-dir/x.gguf"), Error);
}

TEST_F(SynthTest, CommandWritesAFileTheEngineOpens) {
  const std::string out = (dir_ / "cli.gguf").string();
  std::string log;
  ASSERT_EQ(test::run_command(test::binary_path() +
                                  " synth --shape tiny --dtype q6_k --layers 1 --seed 3 -o " + out,
                              &log),
            0)
      << log;
  auto spec = open_model_spec(out);
  EXPECT_EQ(spec->cfg.n_layer, 1);
  EXPECT_EQ(spec->layers[0].get(LayerTensor::Wq)->dtype, DType::Q6_K);
  EXPECT_NE(
      test::run_command(test::binary_path() + " synth --shape nope --dtype q8_0 -o " + out, &log),
      0);
  EXPECT_NE(log.find("known: tiny"), std::string::npos) << log;
  EXPECT_NE(
      test::run_command(test::binary_path() + " synth --shape tiny --dtype q8_k -o " + out, &log),
      0);
  EXPECT_NE(log.find("--dtype"), std::string::npos) << log;
}

// A GGML type this build knows by name but has no kernels for (i8 here: its file's type field
// rewritten in place; its rows are shorter than q8_0's, so the tensor still fits) refuses the
// model by tensor and type name, through the CLI with exit code 2.
TEST_F(SynthTest, AKnownTypeWithoutKernelsIsRefusedByName) {
  const std::string path = write("tiny", DType::Q8_0, 1);
  std::vector<uint8_t> bytes = file_bytes(path);
  const std::string name = "blk.0.attn_q.weight";
  const auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  // After the name: n_dims (u32), the dims (u64 each), then the type (u32).
  const size_t dims_at = static_cast<size_t>(at - bytes.begin()) + name.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, &bytes[dims_at], 4);
  ASSERT_EQ(n_dims, 2u);
  uint32_t type = 0;
  std::memcpy(&type, &bytes[dims_at + 4 + 8 * n_dims], 4);
  ASSERT_EQ(type, static_cast<uint32_t>(DType::Q8_0));
  type = static_cast<uint32_t>(DType::I8);
  std::memcpy(&bytes[dims_at + 4 + 8 * n_dims], &type, 4);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  try {
    open_model_spec(path);
    ADD_FAILURE() << "opened a model with an i8 matrix";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'" + name + "' has type i8"), std::string::npos)
        << e.what();
  }
  std::string log;
  EXPECT_EQ(test::run_command(test::binary_path() + " run -m " + path + " -p hi -n 1", &log), 2);
  EXPECT_NE(log.find("has type i8"), std::string::npos) << log;
}

// The Q4_K_M and Q5_K_M mixes: with 2 layers llama.cpp's use_more_bits() picks layer 1 (the last
// eighth) only, and the tied embedding is the output, so q6_k.
TEST_F(SynthTest, KMixesRaiseWhatLlamaCppRaises) {
  for (const auto& [name, base] : {std::pair{"q4_k_m", DType::Q4_K}, {"q5_k_m", DType::Q5_K}}) {
    const std::string out = (dir_ / (std::string(name) + ".gguf")).string();
    std::string log;
    ASSERT_EQ(test::run_command(
                  test::binary_path() + " synth --shape tiny --dtype " + name + " -o " + out, &log),
              0)
        << log;
    auto spec = open_model_spec(out);
    EXPECT_EQ(spec->token_embd.dtype, DType::Q6_K) << name;
    for (int64_t l = 0; l < 2; ++l) {
      const LayerIndex& L = spec->layers[static_cast<size_t>(l)];
      const DType raised = l == 1 ? DType::Q6_K : base;
      EXPECT_EQ(L.get(LayerTensor::Wq)->dtype, base) << name << " " << l;
      EXPECT_EQ(L.get(LayerTensor::Wk)->dtype, base) << name << " " << l;
      EXPECT_EQ(L.get(LayerTensor::Wv)->dtype, raised) << name << " " << l;
      EXPECT_EQ(L.get(LayerTensor::FfnGate)->dtype, base) << name << " " << l;
      EXPECT_EQ(L.get(LayerTensor::FfnDown)->dtype, raised) << name << " " << l;
    }
  }
}

// llama.cpp's quantiser counts a DeltaNet layer's attn_qkv as an attn_v and matches the shared
// expert's ffn_down_shexp as an ffn_down: with 4 layers use_more_bits() picks layers 2 and 3.
TEST_F(SynthTest, KMixRaisesTheHybridsLikeLlamaCpp) {
  SynthOptions o;
  o.shape = "tiny-hybrid-moe";
  o.dtype = DType::Q4_K;
  o.k_m_mix = true;
  o.threads = 2;
  const std::string path = (dir_ / "hybrid-q4km.gguf").string();
  write_synth_model(o, path);
  auto spec = open_model_spec(path);
  for (int64_t l = 0; l < 4; ++l) {
    const LayerIndex& L = spec->layers[static_cast<size_t>(l)];
    const DType raised = l >= 2 ? DType::Q6_K : DType::Q4_K;
    const LayerTensor v = l == 3 ? LayerTensor::Wv : LayerTensor::DnQkv;
    EXPECT_EQ(L.get(v)->dtype, raised) << l;
    EXPECT_EQ(L.get(LayerTensor::ShexpDown)->dtype, raised) << l;
    EXPECT_EQ(L.get(LayerTensor::ShexpUp)->dtype, DType::Q4_K) << l;
    if (l < 3) {
      EXPECT_EQ(L.get(LayerTensor::DnZ)->dtype, DType::Q4_K) << l;
      EXPECT_EQ(L.get(LayerTensor::DnConv)->dtype, DType::F32) << l;
    }
  }
  EXPECT_EQ(spec->layers[2].expert_stride(), spec->layers[3].expert_stride());
  EXPECT_LT(spec->layers[1].expert_stride(), spec->layers[2].expert_stride());
}

// In a K_M mix a layer's experts may be larger than another's (q6_k down projections where
// llama.cpp raises them): slots are sized per layer and the footprint counts them so, and a
// streamed run through those slots gives the resident run's logits.
TEST_F(SynthTest, KMixSlotsAreSizedPerLayer) {
  const std::string out = (dir_ / "moe-q4km.gguf").string();
  std::string log;
  ASSERT_EQ(test::run_command(
                test::binary_path() + " synth --shape tiny-moe --dtype q4_k_m -o " + out, &log),
            0)
      << log;
  auto spec = open_model_spec(out);
  ASSERT_EQ(spec->layers.size(), 2u);
  const uint64_t s0 = spec->layers[0].expert_stride(), s1 = spec->layers[1].expert_stride();
  EXPECT_LT(s0, s1) << "layer 1's down projections are q6_k";
  EXPECT_EQ(spec->expert_stride, s1);
  EXPECT_EQ(spec->expert_slot_set, s0 + s1);
  const auto n_expert = static_cast<uint64_t>(spec->cfg.n_expert);
  FootprintRequest req;
  const Footprint resident = compute_footprint(*spec, req);
  EXPECT_EQ(resident.resident, spec->resident_bytes + n_expert * (s0 + s1));
  EXPECT_EQ(resident.resident, spec->resident_bytes + spec->routed_expert_bytes);
  req.expert_slots = 2;
  EXPECT_EQ(compute_footprint(*spec, req).expert_slots, 2 * (s0 + s1));

  const std::string logits = test::binary_path() + " logits -m " + out +
                             " --tokens 1,2,3,4,5,6,7,8,9,10 --backend cpu --out ";
  const std::string a = (dir_ / "resident.bin").string(), b = (dir_ / "streamed.bin").string();
  ASSERT_EQ(test::run_command(logits + a, &log), 0) << log;
  ASSERT_EQ(test::run_command(logits + b + " --expert-slots 2", &log), 0) << log;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::vector<char> ra{std::istreambuf_iterator<char>(fa), {}},
      rb{std::istreambuf_iterator<char>(fb), {}};
  ASSERT_FALSE(ra.empty());
  EXPECT_EQ(ra, rb);
}

}  // namespace
}  // namespace ts

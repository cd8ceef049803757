// Gemma 4's configuration as both formats state it (per-layer head dims and kv heads, KV sharing,
// the double-wide MLP, per-layer embeddings, k = v), its footprint (KV rows only for the layers
// that write them, the per-layer embedding table mapped rather than resident), one-line refusals
// of bad metadata.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/family.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "runtime/footprint.h"
#include "test_paths.h"

namespace ts {
namespace {

std::vector<int64_t> v64(std::initializer_list<int64_t> v) {
  return v;
}

TEST(Gemma4Config, DenseFromBothFormats) {
  for (const char* form : {"model-f32.gguf", "hf"}) {
    const std::string path = test::fixture_file("gemma4", form);
    TS_REQUIRE_SHARED(path);
    const ArchConfig c = read_arch_config(*ModelSource::open(path));
    SCOPED_TRACE(form);
    EXPECT_EQ(c.family, Family::Gemma4);
    EXPECT_EQ(c.layer_head_dim, v64({16, 16, 16, 32, 16, 32}));
    EXPECT_EQ(c.layer_n_head_kv, v64({2, 2, 2, 2, 2, 2}));
    EXPECT_EQ(c.layer_n_ff, v64({64, 64, 64, 64, 128, 128}));
    // Layers 4 and 5 read the rows of the last earlier layer of their type.
    EXPECT_EQ(c.layer_kv_source, (std::vector<int32_t>{0, 1, 2, 3, 2, 3}));
    EXPECT_EQ(c.n_embd_per_layer, 8);
    EXPECT_FALSE(c.attn_k_eq_v);
    EXPECT_TRUE(c.attn_v_norm);
    EXPECT_FLOAT_EQ(c.attn_scale, 1.0f);
    EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
    EXPECT_FALSE(c.norm_plus_one);
    EXPECT_EQ(c.sliding_window, 8);
  }
}

TEST(Gemma4Config, MoeFromBothFormats) {
  for (const char* form : {"model-f32.gguf", "hf"}) {
    const std::string path = test::fixture_file("gemma4_moe", form);
    TS_REQUIRE_SHARED(path);
    SCOPED_TRACE(form);
    // k = v is settled by the tensors in a GGUF (no key says it): the spec's config.
    const auto spec = open_model_spec(path);
    const ArchConfig& c = spec->cfg;
    EXPECT_EQ(c.layer_head_dim, v64({16, 16, 16, 16, 16, 32}));
    EXPECT_EQ(c.layer_n_head_kv, v64({2, 2, 2, 2, 2, 1}));
    EXPECT_TRUE(c.attn_k_eq_v);
    EXPECT_TRUE(c.moe_dense_beside);
    EXPECT_EQ(c.n_expert, 8);
    EXPECT_EQ(c.n_expert_used, 2);
    EXPECT_EQ(c.n_ff_expert, 16);
    EXPECT_EQ(c.n_embd_per_layer, 0);
    EXPECT_EQ(spec->layers[5].get(LayerTensor::Wv), nullptr);
  }
}

TEST(Gemma4Footprint, CacheOnlyForLayersThatWriteItAndTableMapped) {
  const std::string path = test::fixture_file("gemma4", "model-f32.gguf");
  TS_REQUIRE_SHARED(path);
  const auto spec = open_model_spec(path);
  // f32 K and V rows of layers 0-2 (2 heads x 16) and 3 (2 x 32); 4 and 5 hold none.
  EXPECT_EQ(kv_bytes_per_token(spec->cfg, DType::F32), 2u * (3 * 32 + 64) * 4);
  // The per-layer table ([4096][6 x 8] f32) is read in place: mapped, not resident.
  EXPECT_EQ(spec->mapped_bytes, 4096u * 48 * 4);
  const Footprint f = compute_footprint(*spec, {.ctx = 64, .kv_type = DType::F32});
  EXPECT_EQ(f.mapped, spec->mapped_bytes);
  EXPECT_EQ(f.kv_cache, 64u * 2 * (3 * 32 + 64) * 4);
  uint64_t all = 0;
  for (const TensorRef& t : spec->source->all_tensors()) all += t.nbytes;
  EXPECT_EQ(spec->resident_bytes + spec->mapped_bytes, all);
}

// The fixture's metadata with `key` replaced (or dropped when value is null).
std::string gguf_with(const GgufFile& fixture, const std::string& key, const GgufValue* value) {
  GgufWriter w;
  for (const auto& [k, v] : fixture.metadata()) {
    if (k != key)
      w.add_kv(k, v);
    else if (value != nullptr)
      w.add_kv(k, *value);
  }
  const std::string path = test::scratch_path("gemma4-edited.gguf");
  w.write(path);
  return path;
}

void expect_config_error(const std::string& path, const std::string& field) {
  try {
    read_arch_config(*ModelSource::open(path));
    ADD_FAILURE() << "opened without " << field;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(Gemma4Config, BadMetadataNamesTheField) {
  const std::string path = test::fixture_file("gemma4", "model-f32.gguf");
  TS_REQUIRE_SHARED(path);
  const auto fixture = GgufFile::open(path);
  expect_config_error(gguf_with(*fixture, "gemma4.attention.sliding_window_pattern", nullptr),
                      "gemma4.attention.sliding_window_pattern");
  expect_config_error(gguf_with(*fixture, "gemma4.attention.key_length_swa", nullptr),
                      "gemma4.attention.key_length_swa");
  const GgufValue too_many = gguf_int(GgufType::U32, 6);
  expect_config_error(gguf_with(*fixture, "gemma4.attention.shared_kv_layers", &too_many),
                      "shared_kv_layers");
  const GgufValue odd_kv = gguf_int(GgufType::U32, 3);
  expect_config_error(gguf_with(*fixture, "gemma4.attention.head_count_kv", &odd_kv),
                      "attention.head_count_kv");
}

}  // namespace
}  // namespace ts

// Gemma 3's attention scale read from a GGUF, which carries no query_pre_attn_scalar: 1/sqrt of
// head_dim, but for the 27B (the one size of 62 layers), whose scalar is n_embd / n_head. The
// fixture's metadata is rewritten with 62 layers and with n_embd / n_head (32) unlike head_dim
// (16), as the 27B's 168 is unlike its 128.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/family.h"
#include "model/model_source.h"
#include "test_paths.h"

namespace ts {
namespace {

ArchConfig config_with(const GgufFile& fixture, int64_t layers, int64_t heads) {
  GgufWriter w;
  for (const auto& [key, value] : fixture.metadata()) {
    if (key == "gemma3.block_count")
      w.add_kv(key, gguf_int(GgufType::U32, layers));
    else if (key == "gemma3.attention.head_count")
      w.add_kv(key, gguf_int(GgufType::U32, heads));
    else
      w.add_kv(key, value);
  }
  const std::string path = test::scratch_path("gemma3-" + std::to_string(layers) + "-layers.gguf");
  w.write(path);
  return read_arch_config(*ModelSource::open(path));
}

TEST(Gemma3Config, GgufAttentionScaleFollowsTheModelSize) {
  const auto fixture = GgufFile::open(test::fixtures_dir() + "/models/gemma3/model-f32.gguf");
  const ArchConfig own = config_with(*fixture, 6, 4);
  ASSERT_EQ(own.head_dim, 16);
  ASSERT_EQ(own.n_embd, 64);
  EXPECT_FLOAT_EQ(own.attn_scale, 1.0f / std::sqrt(16.0f));
  // Other depths keep 1/sqrt(head_dim) whatever n_embd / n_head is (Gemma 3 1B: 288 against 256).
  EXPECT_FLOAT_EQ(config_with(*fixture, 26, 2).attn_scale, 1.0f / std::sqrt(16.0f));
  const ArchConfig big = config_with(*fixture, 62, 2);
  EXPECT_FLOAT_EQ(big.attn_scale, 1.0f / std::sqrt(32.0f));
}

}  // namespace
}  // namespace ts

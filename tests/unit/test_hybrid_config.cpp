// A hybrid model whose DeltaNet sizes, layer pattern or tensors do not add up is refused at open
// with one error naming the field or tensor (exit code 2 through the CLI): the fixtures' GGUFs
// rewritten with one bad value or one tensor left out each.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/model_spec.h"
#include "test_paths.h"

namespace ts {
namespace {

using Edit = std::function<bool(const std::string& key, GgufWriter& w, const GgufValue& v)>;

// The fixture `name`'s GGUF, or "" where it is in the shared data only (the test skips).
std::string fixture(const std::string& name) {
  return test::fixture_file(name, "model-f32.gguf");
}

// The GGUF at `path` rewritten: each metadata entry through `edit` (true: it wrote or dropped the
// entry itself), every tensor but `drop`.
std::string rewritten(const std::string& path, const Edit& edit, const std::string& drop = "") {
  const auto in = GgufFile::open(path);
  GgufWriter w;
  for (const auto& [key, value] : in->metadata())
    if (!edit(key, w, value)) w.add_kv(key, value);
  for (const GgufTensor& t : in->tensors())
    if (t.name != drop) w.add_tensor(t.name, t.dtype, t.dims, in->tensor_data(t), t.nbytes);
  const std::string out = test::scratch_path("edited.gguf");
  w.write(out);
  return out;
}

Edit set_u32(const std::string& target, int64_t v) {
  return [=](const std::string& key, GgufWriter& w, const GgufValue&) {
    if (key != target) return false;
    w.add_kv(key, gguf_int(GgufType::U32, v));
    return true;
  };
}

const Edit kUnchanged = [](auto&&...) { return false; };

TEST(HybridConfig, FixtureOpensRewritten) {
  EXPECT_NO_THROW(open_model_spec(rewritten(fixture("qwen3_5"), kUnchanged)));
}

TEST(HybridConfig, InconsistentDeltaNetSizes) {
  test::expect_refused(rewritten(fixture("qwen3_5"), set_u32("qwen35.ssm.group_count", 3)),
                       "not a multiple of its key heads");
  test::expect_refused(rewritten(fixture("qwen3_5"), set_u32("qwen35.ssm.inner_size", 66)),
                       "ssm.inner_size");
  test::expect_refused(rewritten(fixture("qwen3_5"), set_u32("qwen35.ssm.conv_kernel", 0)),
                       "conv kernel");
  test::expect_refused(rewritten(fixture("qwen3_5"), set_u32("qwen35.ssm.conv_kernel", 9)),
                       "conv kernel");
  test::expect_refused(rewritten(fixture("qwen3_5"), set_u32("qwen35.ssm.state_size", 0)),
                       "key head dim");
}

TEST(HybridConfig, BadLayerPattern) {
  const Edit short_list = [](const std::string& key, GgufWriter& w, const GgufValue&) {
    if (key != "qwen35.attention.recurrent_layers") return false;
    GgufArray a;
    a.elem = GgufType::Bool;
    a.ints = {1, 1, 0};
    w.add_kv(key, gguf_array(std::move(a)));
    return true;
  };
  test::expect_refused(rewritten(fixture("qwen3_5"), short_list), "recurrent_layers");
}

TEST(HybridConfig, MissingTensorOfOneLayer) {
  for (const char* t : {"blk.1.ssm_a", "blk.2.ssm_dt.bias", "blk.0.ssm_conv1d.weight"})
    test::expect_refused(rewritten(fixture("qwen3_5"), kUnchanged, t),
                         std::string("missing tensor '") + t + "'");
}

// Qwen3-Next's GGUF (no per-layer list: the interval decides; beta and alpha fused) and
// Qwen3.5-MoE's (the shared expert's gate), from the shared data.
TEST(HybridConfig, Qwen3NextAndMoeFiles) {
  const std::string next = fixture("qwen3_next"), moe = fixture("qwen3_5_moe");
  TS_REQUIRE_SHARED(next);
  TS_REQUIRE_SHARED(moe);
  EXPECT_NO_THROW(open_model_spec(rewritten(next, kUnchanged)));
  EXPECT_NO_THROW(open_model_spec(rewritten(moe, kUnchanged)));
  test::expect_refused(rewritten(next, set_u32("qwen3next.full_attention_interval", 0)),
                       "full_attention_interval");
  test::expect_refused(rewritten(next, kUnchanged, "blk.0.ssm_ba.weight"),
                       "missing tensor 'blk.0.ssm_ba.weight'");
  test::expect_refused(rewritten(moe, kUnchanged, "blk.3.ffn_gate_inp_shexp.weight"),
                       "missing tensor 'blk.3.ffn_gate_inp_shexp.weight'");
}

}  // namespace
}  // namespace ts

// Every family fixture, in every form available (HF directory, GGUF f32/f16), against the
// Hugging Face float32 reference logits, through chunked prefill at several micro-batch sizes
// and through one-token decode; and prefill against decode. The hybrid fixtures' 80-token prompts
// cross micro-batches of 64, 7 and 5 rows, so their recurrent state is carried between them.
#include <gtest/gtest.h>

#include "fixture_models.h"

namespace ts {
namespace {

const std::vector<std::string> kFixtures = {
    "llama",       "llama_rope_llama3", "mistral",       "qwen2",      "qwen3",   "gemma3",
    "mixtral",     "qwen3_moe",         "minimax_m2",    "qwen3_next", "qwen3_5", "qwen3_5_moe",
    "deepseek_v3", "gpt_oss",           "gpt_oss_mxfp4", "qwen3_vl",   "gemma4",  "gemma4_moe",
    "glm4_moe",    "glm4_moe_fp8"};

// The README's bounds: f32 weights with an f32 KV cache 1e-4 of the largest logit; f16 5e-3.
// MXFP4 is against its own exact reference (the experts dequantised), its kernels keeping the
// activations in f32: 1e-4 too.
double tolerance(const std::string& form) {
  return form == "f16" ? 5e-3 : 1e-4;
}

class FixtureLogits : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(FixtureLogits, MatchesReferenceInPrefillAndDecode) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const std::vector<float> ref = test::read_f32_file(test::fixture_ref_logits(f));
  const int64_t V = static_cast<int64_t>(ref.size() / ids.size());
  const std::vector<float> decode = test::run_logits(f.path, ids, {.batch = 1, .decode = true});
  for (int64_t batch : {64, 7, 5, 1}) {
    const std::vector<float> prefill = test::run_logits(f.path, ids, {.batch = batch});
    const auto c = test::compare_logits(prefill, ref, V);
    EXPECT_LE(c.rel, tolerance(f.form)) << "prefill batch " << batch << ": " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << "prefill batch " << batch << ": " << c.summary();
    // Prefill and decode run the same kernels on different row counts: float rounding only.
    const auto pd = test::compare_logits(prefill, decode, V);
    EXPECT_LE(pd.rel, 1e-5) << "prefill batch " << batch << " vs decode: " << pd.summary();
  }
  const auto c = test::compare_logits(decode, ref, V);
  EXPECT_LE(c.rel, tolerance(f.form)) << "decode: " << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << "decode: " << c.summary();
}

std::string name(const ::testing::TestParamInfo<test::FixtureForm>& i) {
  return i.param.fixture + "_" + i.param.form;
}

INSTANTIATE_TEST_SUITE_P(Families, FixtureLogits,
                         ::testing::ValuesIn(test::fixture_forms(kFixtures)), name);

}  // namespace
}  // namespace ts

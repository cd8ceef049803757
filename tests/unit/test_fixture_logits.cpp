// Every family fixture, in every form available (HF directory, GGUF f32/f16), against the
// Hugging Face float32 reference logits, through chunked prefill at several micro-batch sizes
// and through one-token decode; and prefill against decode.
#include <gtest/gtest.h>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace ts {
namespace {

const std::vector<std::string> kFixtures = {
    "llama",  "llama_rope_llama3", "mistral",   "qwen2",     "qwen3",
    "gemma3", "mixtral",           "qwen3_moe", "minimax_m2"};

// The README's bounds: f32 weights with an f32 KV cache 1e-4 of the largest logit; f16 5e-3.
double tolerance(const std::string& form) {
  return form == "f16" ? 5e-3 : 1e-4;
}

std::vector<float> run(const test::FixtureForm& f, const std::vector<int32_t>& ids, int64_t batch,
                       bool decode, int64_t slots = 0) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  o.prefill_batch = batch;
  o.expert_slots = slots;
  auto engine = Engine::open(f.path, o);
  Session s(*engine);
  const int64_t V = engine->cfg().n_vocab;
  std::vector<float> logits(ids.size() * static_cast<size_t>(V));
  if (decode) {
    for (size_t i = 0; i < ids.size(); ++i)
      s.feed(&ids[i], 1, logits.data() + i * static_cast<size_t>(V), false);
  } else {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
  }
  return logits;
}

class FixtureLogits : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(FixtureLogits, MatchesReferenceInPrefillAndDecode) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const std::vector<float> ref = test::read_f32_file(f.dir + "/ref_logits.f32");
  const int64_t V = static_cast<int64_t>(ref.size() / ids.size());
  const std::vector<float> decode = run(f, ids, 1, true);
  for (int64_t batch : {64, 7, 5, 1}) {
    const std::vector<float> prefill = run(f, ids, batch, false);
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

// Rows of different sequences at different positions in one forward pass give the logits each
// sequence gets on its own (the server batches concurrent decode steps this way).
#include <gtest/gtest.h>

#include "fixture_models.h"
#include "runtime/forward.h"
#include "runtime/session.h"

namespace ts {
namespace {

class BatchedForward : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(BatchedForward, MatchesSeparateSequences) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  auto engine = Engine::open(f.path, o);
  const int64_t V = engine->cfg().n_vocab;
  // Three sequences: prompts of different lengths, then one decode step each, batched.
  const std::vector<std::vector<int32_t>> prompts = {{ids.begin(), ids.begin() + 5},
                                                     {ids.begin() + 3, ids.begin() + 14},
                                                     {ids.begin() + 10, ids.end()}};
  const std::vector<int32_t> next = {ids[7], ids[2], ids[0]};
  std::vector<std::vector<float>> alone(3, std::vector<float>(static_cast<size_t>(V)));
  for (size_t s = 0; s < 3; ++s) {
    Session session(*engine);
    session.feed(prompts[s].data(), static_cast<int64_t>(prompts[s].size()), alone[s].data(),
                 false);
    session.feed(&next[s], 1, alone[s].data(), false);
  }
  Forward forward(*engine, 64);
  std::vector<std::unique_ptr<KvCache>> kv;
  std::vector<SeqChunk> prefill;
  for (size_t s = 0; s < 3; ++s) {
    kv.push_back(std::make_unique<KvCache>(*engine, 64));
    prefill.push_back(
        {kv[s].get(), prompts[s].data(), static_cast<int64_t>(prompts[s].size()), nullptr, false});
  }
  forward.run(prefill);
  std::vector<std::vector<float>> batched(3, std::vector<float>(static_cast<size_t>(V)));
  std::vector<SeqChunk> step;
  for (size_t s = 0; s < 3; ++s)
    step.push_back({kv[s].get(), &next[s], 1, batched[s].data(), false});
  forward.run(step);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(kv[s]->n_past, static_cast<int64_t>(prompts[s].size()) + 1);
    const auto c = test::compare_logits(batched[s], alone[s], V);
    // Same kernels, same per-row arithmetic; only the row blocking of the matmul differs.
    EXPECT_LE(c.rel, 1e-6) << "sequence " << s << ": " << c.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, BatchedForward,
                         ::testing::ValuesIn(test::fixture_forms({"qwen2", "gemma3", "qwen3_moe",
                                                                  "minimax_m2"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

}  // namespace
}  // namespace ts

// Rows of different sequences at different positions in one forward pass give the logits each
// sequence gets on its own, bit for bit (the server batches concurrent decode steps this way, and
// a request's tokens must not depend on the others beside it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/error.h"
#include "fixture_models.h"
#include "runtime/forward.h"
#include "runtime/session.h"
#include "test_paths.h"

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
                                                     {ids.begin() + 10, ids.begin() + 24}};
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
    EXPECT_EQ(kv[s]->n_past(), static_cast<int64_t>(prompts[s].size()) + 1);
    // Same kernels, same per-row arithmetic whatever tile of the matmul a row falls in: the bits.
    EXPECT_EQ(
        0, std::memcmp(batched[s].data(), alone[s].data(), static_cast<size_t>(V) * sizeof(float)))
        << "sequence " << s << ": " << test::compare_logits(batched[s], alone[s], V).summary();
  }
}

// The head computes the wanted rows' logits in chunks of head_rows, each copied out before the
// next. Runs four sequences that want every row, the last row, none and every row (5 + 1 + 0 + 11
// rows) with head chunks of 1, 4 and 7 rows, which end inside a sequence's rows, between
// sequences and on the last-row sequence, and compares each with one chunk over every row (rel at
// most `tol`). Nothing may be written past the rows a sequence wants.
void expect_head_chunks_give_one_chunk(const std::string& path, const std::vector<int32_t>& ids,
                                       double tol) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.kv_type = DType::F32;
  auto engine = Engine::open(path, o);
  const auto V = static_cast<size_t>(engine->cfg().n_vocab);
  const std::vector<std::vector<int32_t>> prompts = {{ids.begin(), ids.begin() + 5},
                                                     {ids.begin() + 3, ids.begin() + 14},
                                                     {ids.begin() + 10, ids.begin() + 24},
                                                     {ids.begin() + 1, ids.begin() + 12}};
  const std::vector<int> wanted = {5, 1, 0, 11};
  constexpr float kUnwritten = -12345.0f;
  const auto run = [&](int64_t head_rows) {
    Forward forward(*engine, 64, head_rows);
    std::vector<std::unique_ptr<KvCache>> kv;
    // Each sequence's logits, then one row that must stay unwritten.
    std::vector<std::vector<float>> logits;
    std::vector<SeqChunk> chunks;
    for (size_t s = 0; s < prompts.size(); ++s) {
      kv.push_back(std::make_unique<KvCache>(*engine, 64));
      logits.emplace_back((static_cast<size_t>(wanted[s]) + 1) * V, kUnwritten);
      chunks.push_back({kv[s].get(), prompts[s].data(), static_cast<int64_t>(prompts[s].size()),
                        wanted[s] > 0 ? logits[s].data() : nullptr, wanted[s] > 1});
    }
    forward.run(chunks);
    for (size_t s = 0; s < prompts.size(); ++s)
      for (size_t i = static_cast<size_t>(wanted[s]) * V; i < logits[s].size(); ++i)
        EXPECT_EQ(logits[s][i], kUnwritten) << "head_rows " << head_rows << ", sequence " << s;
    return logits;
  };
  const std::vector<std::vector<float>> one = run(kHeadRows);
  for (int64_t head_rows : {1, 4, 7}) {
    const std::vector<std::vector<float>> chunked = run(head_rows);
    for (size_t s = 0; s < prompts.size(); ++s) {
      if (wanted[s] == 0) continue;
      const auto c = test::compare_logits(chunked[s], one[s], static_cast<int64_t>(V));
      EXPECT_LE(c.rel, tol) << "head_rows " << head_rows << ", sequence " << s << ": "
                            << c.summary();
    }
  }
}

// The f32 and f16 GEMMs' tiles follow the row count: the same tolerance as above.
TEST_P(BatchedForward, HeadInChunksGivesTheLogitsOfOneChunk) {
  expect_head_chunks_give_one_chunk(GetParam().path, test::fixture_prompt(GetParam()), 1e-6);
}

// Over q8_0 panels each row of the GEMM gets the bits of the one-row GEMV, whatever the chunk.
TEST(HeadChunks, BundledQ8_0GivesTheBitsOfOneChunk) {
  std::vector<int32_t> ids(32);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(100 + 37 * i);
  expect_head_chunks_give_one_chunk(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", ids,
                                    cpu::panel_kernels_active() ? 0.0 : 1e-6);
}

// Session::score, which sends only the scored rows through the head and scores them in the
// backend, against the logits feed() returns for every row, scored on the host: over q8_0 panels
// the same bits. Micro-batches of 16: the first ends before the scored rows, the others cut them.
TEST(SessionScore, GivesTheNllOfEveryRowsLogits) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 64;
  o.prefill_batch = 16;
  auto engine = Engine::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", o);
  const int64_t V = engine->cfg().n_vocab, n = 40, from = 17, to = 39;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((100 + 37 * i) % V);
  std::vector<float> logits(static_cast<size_t>(n * V));
  Session fed(*engine);
  fed.feed(ids.data(), n, logits.data(), true);
  std::vector<double> got(static_cast<size_t>(to - from), -1.0);
  Session scored(*engine);
  scored.score(ids.data(), n, from, to, ids.data() + from + 1, got.data());
  EXPECT_EQ(scored.n_past(), n);
  for (int64_t j = from; j < to; ++j) {
    const double want = nll_of_row(logits.data() + j * V, V, ids[static_cast<size_t>(j + 1)]);
    const double tol = cpu::panel_kernels_active() ? 0.0 : 1e-5 * std::fabs(want);
    EXPECT_NEAR(got[static_cast<size_t>(j - from)], want, tol) << "row " << j;
  }
  // Bad ranges and targets are refused before anything runs.
  scored.reset();
  EXPECT_THROW(scored.score(ids.data(), n, 20, 10, ids.data(), got.data()), Error);
  EXPECT_THROW(scored.score(ids.data(), n, 0, n + 1, ids.data(), got.data()), Error);
  const std::vector<int32_t> bad(static_cast<size_t>(n), static_cast<int32_t>(V));
  EXPECT_THROW(scored.score(ids.data(), n, from, to, bad.data(), got.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(Families, BatchedForward,
                         ::testing::ValuesIn(test::fixture_forms(
                             {"qwen2", "gemma3", "qwen3_moe", "minimax_m2", "qwen3_next", "qwen3_5",
                              "deepseek_v3", "gemma4", "gemma4_moe", "glm4_moe", "qwen3_vl_moe"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

}  // namespace
}  // namespace ts

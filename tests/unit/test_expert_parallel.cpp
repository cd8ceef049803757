// Expert parallelism over ranks as threads (CPU backends, the thread communicator): an MoE layer
// whose experts are split over 2 and 4 ranks, each rank running only its own experts and the
// outputs combined on each token's home rank, gives exactly the bits of one rank's MoeFfn::run,
// for every fixture form, layer, placement and micro-batch size tried; and a whole model's logits
// under expert parallelism are one rank's, in prefill and decode. (The order of the sum
// matters only where a token has 3 or more experts: gpt_oss's 4 and the balanced placement, whose
// outputs come back out of expert order, are what would catch a combine in another order.)
#include <gtest/gtest.h>

#include <cstring>

#include "fixture_models.h"
#include "moe_rank.h"
#include "parallel/thread_communicator.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

void expect_bit_identical(const std::string& path) {
  constexpr int64_t kMaxRows = 40;
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 1;
  o.ctx = 64;
  test::MoeRank single(path, o, kMaxRows);
  const ArchConfig& c = single.engine->cfg();
  const std::vector<int64_t> layers = test::moe_layers(*single.engine);
  ASSERT_FALSE(layers.empty());
  for (int ranks : {2, 4}) {
    std::vector<std::unique_ptr<test::MoeRank>> rank;
    for (int r = 0; r < ranks; ++r)
      rank.push_back(std::make_unique<test::MoeRank>(path, o, kMaxRows));
    // Contiguous runs; and a balanced placement by made-up loads, whose ranks hold experts out of
    // order (the combine then sums rows that came back in another order).
    std::vector<double> load(static_cast<size_t>(c.n_expert));
    for (size_t e = 0; e < load.size(); ++e) load[e] = static_cast<double>((e * 7) % 5);
    for (const ExpertPlacement& place :
         {place_experts_contiguous(c.n_expert, ranks), place_experts_balanced(load, ranks)})
      for (int64_t l : {layers.front(), layers.back()})
        for (int64_t M : {int64_t{1}, int64_t{3}, int64_t{17}, kMaxRows}) {
          const std::vector<float> h =
              test::random_rows(M, c.n_embd, static_cast<uint32_t>(M * 31 + l));
          const std::vector<float> want = single.run(l, h, M);
          std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
          run_ranks(make_thread_communicators(ranks), [&](Communicator& comm) {
            got[static_cast<size_t>(comm.rank())] =
                rank[static_cast<size_t>(comm.rank())]->run_parallel(comm, place, l, h, M);
          });
          for (int r = 0; r < ranks; ++r)
            ASSERT_EQ(0, std::memcmp(want.data(), got[static_cast<size_t>(r)].data(),
                                     want.size() * sizeof(float)))
                << ranks << " ranks, rank " << r << ", layer " << l << ", " << M << " rows";
        }
  }
}

class ExpertParallel : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(ExpertParallel, IsBitIdenticalToOneRank) {
  expect_bit_identical(GetParam().path);
}

INSTANTIATE_TEST_SUITE_P(MoeFixtures, ExpertParallel,
                         ::testing::ValuesIn(test::fixture_forms(
                             {"mixtral", "qwen3_moe", "minimax_m2", "qwen3_next", "qwen3_5_moe",
                              "deepseek_v3", "gpt_oss", "gpt_oss_mxfp4", "gemma4_moe", "glm4_moe",
                              "glm4_moe_fp8"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

// Whole models: each rank a session of its own engine whose pass runs only its experts; the
// logits of every prompt position, in prefill (micro-batches of 16) and token by token, are one
// rank's bits on every rank.
std::vector<float> logits(Session& s, const std::vector<int32_t>& ids, bool decode) {
  const auto V = static_cast<size_t>(s.engine_vocab());
  std::vector<float> out(ids.size() * V);
  if (!decode) {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), out.data(), true);
    return out;
  }
  for (size_t i = 0; i < ids.size(); ++i) s.feed(&ids[i], 1, out.data() + i * V, false);
  return out;
}

TEST_P(ExpertParallel, LogitsAreBitIdenticalToOneRank) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 1;
  o.ctx = static_cast<int64_t>(ids.size());
  o.prefill_batch = 16;
  auto one = Engine::open(f.path, o);
  const int64_t E = one->cfg().n_expert;
  for (bool decode : {false, true}) {
    Session single(*one);
    const std::vector<float> want = logits(single, ids, decode);
    for (int ranks : {2, 4}) {
      std::vector<std::unique_ptr<Engine>> engine;
      for (int r = 0; r < ranks; ++r) engine.push_back(Engine::open(f.path, o));
      std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
      run_ranks(make_thread_communicators(ranks), [&](Communicator& comm) {
        Session s(*engine[static_cast<size_t>(comm.rank())]);
        s.forward().expert_parallel(comm, place_experts_contiguous(E, ranks));
        got[static_cast<size_t>(comm.rank())] = logits(s, ids, decode);
      });
      for (int r = 0; r < ranks; ++r)
        ASSERT_EQ(0, std::memcmp(want.data(), got[static_cast<size_t>(r)].data(),
                                 want.size() * sizeof(float)))
            << (decode ? "decode" : "prefill") << ", " << ranks << " ranks, rank " << r;
    }
  }
}

// The bundled q8_0 model: quantised experts, whose kernels quantise their input rows.
TEST(ExpertParallel, BundledQ8ModelIsBitIdenticalToOneRank) {
  expect_bit_identical(test::repo_dir() + "/models/tiny-moe-q8_0.gguf");
}

}  // namespace
}  // namespace ts

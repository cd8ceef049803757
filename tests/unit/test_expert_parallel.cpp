// Expert parallelism over ranks as threads (CPU backends, the thread communicator): an MoE layer
// whose experts are split over 2 and 4 ranks, each rank running only its own experts and the
// outputs combined on each token's home rank, gives exactly the bits of one rank's MoeFfn::run,
// for every fixture form, layer, placement and micro-batch size tried.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "fixture_models.h"
#include "moe/expert_parallel_ffn.h"
#include "parallel/thread_communicator.h"
#include "runtime/engine.h"
#include "runtime/footprint.h"
#include "test_paths.h"

namespace ts {
namespace {

// One rank: its own engine (CPU backend, one thread) and MoE FFN with its buffers.
struct Rank {
  Rank(const std::string& path, int64_t max_rows) {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 1;
    o.ctx = 64;
    engine = Engine::open(path, o);
    const ArchConfig& c = engine->cfg();
    const auto B = static_cast<size_t>(max_rows);
    const size_t ff = B * static_cast<size_t>(ffn_row_floats(c));
    const size_t routed = B * static_cast<size_t>(c.n_expert_used * c.n_embd);
    buf.gate = alloc(2 * ff);
    buf.up = buf.gate + ff;
    buf.act = alloc(ff);
    buf.rows = alloc(routed);
    buf.out = alloc(routed);
    std::vector<const MoeLayerWeights*> layers;
    for (const LayerWeights& L : engine->layers()) layers.push_back(L.moe ? &L.routed : nullptr);
    moe = std::make_unique<MoeFfn>(engine->backend(), c, engine->experts(), layers, max_rows, buf,
                                   [this](size_t n) { return alloc(n); });
  }
  ~Rank() {
    moe.reset();
    for (float* p : owned) engine->backend().free(p);
  }
  float* alloc(size_t floats) {
    owned.push_back(static_cast<float*>(engine->backend().alloc(floats * sizeof(float))));
    return owned.back();
  }
  std::unique_ptr<Engine> engine;
  FfnBuffers buf;
  std::unique_ptr<MoeFfn> moe;
  std::vector<float*> owned;
};

std::vector<float> random_rows(int64_t M, int64_t d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(M * d));
  for (float& v : h) v = dist(gen);
  return h;
}

// Layer l's output over h on one rank (MoeFfn::run, the grouped path of a prefill).
std::vector<float> one_rank(Rank& r, int64_t l, const std::vector<float>& h, int64_t M) {
  std::vector<float> out(h.size());
  r.moe->route(l, h.data(), M);
  r.moe->run(l, h.data(), M, false, out.data());
  EXPECT_FALSE(r.moe->output_routed());
  return out;
}

void expect_bit_identical(const std::string& path) {
  constexpr int64_t kMaxRows = 40;
  Rank single(path, kMaxRows);
  const ArchConfig& c = single.engine->cfg();
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (single.engine->layers()[static_cast<size_t>(l)].moe) moe_layers.push_back(l);
  ASSERT_FALSE(moe_layers.empty());
  for (int ranks : {2, 4}) {
    std::vector<std::unique_ptr<Rank>> rank;
    for (int r = 0; r < ranks; ++r) rank.push_back(std::make_unique<Rank>(path, kMaxRows));
    // Contiguous runs; and a balanced placement by made-up loads, whose ranks hold experts out of
    // order (the combine then sums rows that came back in another order).
    std::vector<double> load(static_cast<size_t>(c.n_expert));
    for (size_t e = 0; e < load.size(); ++e) load[e] = static_cast<double>((e * 7) % 5);
    for (const ExpertPlacement& place :
         {place_experts_contiguous(c.n_expert, ranks), place_experts_balanced(load, ranks)})
      for (int64_t l : {moe_layers.front(), moe_layers.back()})
        for (int64_t M : {int64_t{1}, int64_t{3}, int64_t{17}, kMaxRows}) {
          const std::vector<float> h = random_rows(M, c.n_embd, static_cast<uint32_t>(M * 31 + l));
          const std::vector<float> want = one_rank(single, l, h, M);
          std::vector<std::vector<float>> got(static_cast<size_t>(ranks),
                                              std::vector<float>(h.size()));
          const auto comms = make_thread_communicators(ranks);
          run_ranks(comms, [&](Communicator& comm) {
            Rank& me = *rank[static_cast<size_t>(comm.rank())];
            ExpertParallelFfn ep(me.engine->backend(), me.engine->cfg(), *me.moe, me.buf, comm,
                                 place, kMaxRows);
            ep.run(l, h.data(), M, got[static_cast<size_t>(comm.rank())].data());
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
                         ::testing::ValuesIn(test::fixture_forms({"mixtral", "qwen3_moe",
                                                                  "qwen3_5_moe", "gpt_oss"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

// The bundled q8_0 model: quantised experts, whose kernels quantise their input rows.
TEST(ExpertParallel, BundledQ8ModelIsBitIdenticalToOneRank) {
  expect_bit_identical(test::repo_dir() + "/models/tiny-moe-q8_0.gguf");
}

}  // namespace
}  // namespace ts

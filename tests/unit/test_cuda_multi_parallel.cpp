// Several GPUs of one host over NCCL (ctest label `cuda-multi`; skips, saying why, without 2 GPUs
// and the NCCL plugin): the NCCL communicator's collectives give what the thread communicator
// gives; expert parallelism on 2 and all GPUs (up to 4) over the MoE fixtures, each rank on its
// own GPU, is bit-identical to one GPU's MoeFfn::run.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "fixture_models.h"
#include "moe_rank.h"
#include "parallel/nccl.h"
#include "parallel/thread_communicator.h"
#include "parallel_cases.h"
#include "test_paths.h"

namespace ts {
namespace {

// The GPUs to use (at most 4), or 0 with *why.
int gpus(std::string* why) {
  if (nccl_version(why) == 0) return 0;
  const int n = cuda_device_count(why);
  if (n < 2) *why = std::to_string(n) + " CUDA device(s)";
  return n < 2 ? 0 : std::min(n, 4);
}

// body(rank, id) on a thread per rank; the communicators are made inside (NCCL's init waits for
// every rank of the id).
void run_nccl_ranks(int N, const std::function<void(int, const NcclId&)>& body) {
  const NcclId id = nccl_unique_id();
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, id);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

TEST(CudaMulti, NcclCollectivesMatchTheThreadCommunicator) {
  std::string why;
  const int N = gpus(&why);
  if (N == 0) GTEST_SKIP() << "needs 2 GPUs and NCCL: " << why;
  std::vector<std::vector<float>> want(static_cast<size_t>(N)), got(want.size());
  run_ranks(make_thread_communicators(N), [&](Communicator& c) {
    want[static_cast<size_t>(c.rank())] = test::collectives_round(c, nullptr);
  });
  run_nccl_ranks(N, [&](int r, const NcclId& id) {
    auto b = make_cuda_backend(r);
    auto c = make_nccl_communicator(r, N, id, r, b->native_stream());
    got[static_cast<size_t>(r)] = test::collectives_round(*c, b.get());
  });
  EXPECT_EQ(got, want);
}

class CudaMultiExperts : public ::testing::TestWithParam<test::FixtureForm> {};

// M >= 2 rows: one GPU runs a single token's experts by id (MoeFfn::run_indexed), which expert
// parallelism does not yet (docs/PARALLEL.md).
TEST_P(CudaMultiExperts, ExpertParallelIsBitIdenticalToOneGpu) {
  std::string why;
  const int all = gpus(&why);
  if (all == 0) GTEST_SKIP() << "needs 2 GPUs and NCCL: " << why;
  constexpr int64_t kMaxRows = 40;
  const std::string path = GetParam().path;
  EngineOptions o;
  o.backend = "cuda";
  o.ctx = 64;
  test::MoeRank single(path, o, kMaxRows);
  const ArchConfig& c = single.engine->cfg();
  const std::vector<int64_t> layers = test::moe_layers(*single.engine);
  for (int N : {2, all}) {
    std::vector<std::unique_ptr<test::MoeRank>> rank(static_cast<size_t>(N));
    for (int r = 0; r < N; ++r) {
      o.device = r;
      rank[static_cast<size_t>(r)] = std::make_unique<test::MoeRank>(path, o, kMaxRows);
    }
    const ExpertPlacement place = place_experts_contiguous(c.n_expert, N);
    for (int64_t l : {layers.front(), layers.back()})
      for (int64_t M : {int64_t{3}, int64_t{17}, kMaxRows}) {
        const std::vector<float> h =
            test::random_rows(M, c.n_embd, static_cast<uint32_t>(M * 31 + l));
        const std::vector<float> want = single.run(l, h, M);
        std::vector<std::vector<float>> got(static_cast<size_t>(N));
        run_nccl_ranks(N, [&](int r, const NcclId& id) {
          test::MoeRank& me = *rank[static_cast<size_t>(r)];
          auto comm = make_nccl_communicator(r, N, id, r, me.engine->backend().native_stream());
          got[static_cast<size_t>(r)] = me.run_parallel(*comm, place, l, h, M);
        });
        for (int r = 0; r < N; ++r)
          ASSERT_EQ(0, std::memcmp(want.data(), got[static_cast<size_t>(r)].data(),
                                   want.size() * sizeof(float)))
              << N << " GPUs, rank " << r << ", layer " << l << ", " << M << " rows";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(MoeFixtures, CudaMultiExperts,
                         ::testing::ValuesIn(test::fixture_forms({"mixtral", "qwen3_moe",
                                                                  "qwen3_5_moe", "gpt_oss"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

}  // namespace
}  // namespace ts

// Streaming never changes a number: logits with every slot count from top-k up to resident are
// bit-identical to resident mode, in prefill (where a micro-batch routes to more experts than
// there are slots, so experts run in waves) and in decode. A failed expert read stops with an
// error naming the layer and expert.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fixture_models.h"
#include "moe/io_fault.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

std::vector<float> run(const std::string& path, const std::vector<int32_t>& ids, int64_t slots,
                       bool decode, CachePolicyKind policy = CachePolicyKind::Lru,
                       bool prefetch = false) {
  return test::run_logits(path, ids,
                          {.batch = 16,
                           .decode = decode,
                           .slots = slots,
                           .policy = policy,
                           .prefetch = prefetch,
                           .kv = DType::F16});
}

class Streaming : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(Streaming, EverySlotCountIsBitIdenticalToResident) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  auto spec = open_model_spec(f.path);
  const int64_t k = spec->cfg.n_expert_used, E = spec->cfg.n_expert;
  for (bool decode : {false, true}) {
    const std::vector<float> resident = run(f.path, ids, 0, decode);
    for (int64_t slots = k; slots < E; ++slots) {
      for (auto policy : {CachePolicyKind::Lru, CachePolicyKind::Lfu, CachePolicyKind::Flru})
        for (bool prefetch : {false, true}) {
          const std::vector<float> streamed = run(f.path, ids, slots, decode, policy, prefetch);
          ASSERT_EQ(0,
                    std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
              << (decode ? "decode" : "prefill") << " with " << slots << " slots, policy "
              << cache_policy_name(policy) << (prefetch ? " + prefetch" : "");
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MoeFixtures, Streaming,
                         ::testing::ValuesIn(test::fixture_forms(
                             {"mixtral", "qwen3_moe", "minimax_m2", "qwen3_next", "qwen3_5_moe",
                              "deepseek_v3", "gpt_oss", "gpt_oss_mxfp4", "gemma4_moe", "glm4_moe",
                              "glm4_moe_fp8", "qwen3_vl_moe"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

// Each way of reading the experts (io_uring with O_DIRECT, the default above; io_uring through the
// page cache; pread) gives the resident bits, prefetching or not.
TEST_P(Streaming, EveryReadModeIsBitIdenticalToResident) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const int64_t k = open_model_spec(f.path)->cfg.n_expert_used;
  const std::vector<float> resident = run(f.path, ids, 0, true);
  for (ExpertIo io : {ExpertIo::Direct, ExpertIo::Buffered, ExpertIo::Pread})
    for (bool prefetch : {false, true}) {
      const std::vector<float> streamed = test::run_logits(f.path, ids,
                                                           {.batch = 16,
                                                            .decode = true,
                                                            .slots = k + 1,
                                                            .prefetch = prefetch,
                                                            .io = io,
                                                            .kv = DType::F16});
      ASSERT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
          << expert_io_name(io) << (prefetch ? " + prefetch" : "");
    }
}

// Decode steps score the guesses 1 and 2 MoE layers ahead against the routing: counted for every
// MoE layer with one (two) before it, never more hits than experts routed.
TEST(Streaming, LookaheadHitRatesAreCountedPerLayer) {
  const auto forms = test::fixture_forms({"mixtral"});  // the repository keeps its GGUF
  ASSERT_FALSE(forms.empty());
  EngineOptions o;
  o.backend = "cpu";
  o.ctx = 128;
  o.expert_slots = open_model_spec(forms.back().path)->cfg.n_expert_used + 1;
  o.expert_prefetch = true;
  o.expert_io = ExpertIo::Direct;  // guesses are made only where reads go through io_uring
  auto engine = Engine::open(forms.back().path, o);
  if (engine->experts().io() == ExpertIo::Pread)
    GTEST_SKIP() << "io_uring is not available in this build or here";
  Session s(*engine);
  std::vector<float> logits(static_cast<size_t>(engine->cfg().n_vocab));
  const std::vector<int32_t> ids = test::fixture_prompt(forms.back());
  for (int32_t id : ids) s.feed(&id, 1, logits.data(), false);
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < engine->cfg().n_layer; ++l) {
    const ExpertStats st = engine->experts().layer_stats(l);
    if (st.hits + st.misses == 0) continue;
    for (int d = 0; d < 2; ++d) {
      EXPECT_LE(st.ahead_hits[d], st.ahead_total[d]) << "layer " << l;
      const bool guessed = moe_layers > d;
      EXPECT_EQ(guessed ? static_cast<uint64_t>(ids.size()) * engine->cfg().n_expert_used : 0,
                st.ahead_total[d])
          << "layer " << l << ", " << d + 1 << " ahead";
    }
    ++moe_layers;
  }
  EXPECT_GE(moe_layers, 2);
}

TEST(Streaming, SlotsBelowTopKAreRefused) {
  const auto forms = test::fixture_forms({"mixtral"});
  EngineOptions o;
  o.backend = "cpu";
  o.expert_slots = 1;
  try {
    Engine::open(forms.at(0).path, o);
    FAIL() << "1 slot accepted for top-2";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Budget);
    EXPECT_NE(std::string(e.what()).find("below top-k"), std::string::npos) << e.what();
  }
}

TEST(Streaming, TruncatedFileStopsWithAnErrorNamingLayerAndExpert) {
  const auto forms = test::fixture_forms({"mixtral"});
  const std::string copy = test::scratch_path("mixtral-truncated.gguf");
  std::filesystem::copy_file(forms.back().path, copy,
                             std::filesystem::copy_options::overwrite_existing);
  EngineOptions o;
  o.backend = "cpu";
  o.ctx = 32;
  o.expert_slots = 2;
  auto engine = Engine::open(copy, o);
  // Cut the file after open: every expert read from here on is short.
  ASSERT_EQ(0, ::truncate(copy.c_str(), 4096));
  Session s(*engine);
  const std::vector<int32_t> ids = test::fixture_prompt(forms.back());
  std::vector<float> logits(static_cast<size_t>(engine->cfg().n_vocab));
  try {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), false);
    FAIL() << "a generation over a truncated file succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer 0 expert"), std::string::npos) << msg;
    EXPECT_NE(msg.find("short read"), std::string::npos) << msg;
  }
  std::filesystem::remove(copy);
}

// A read error or a short read injected into the I/O layer stops the request with an error naming
// the layer and expert, whichever way the experts are read: no logits come out of a wrong read.
TEST(Streaming, InjectedReadFaultsStopWithANamedError) {
  const auto forms = test::fixture_forms({"mixtral"});
  const std::vector<int32_t> ids = test::fixture_prompt(forms.back());
  for (ExpertIo io : {ExpertIo::Direct, ExpertIo::Buffered, ExpertIo::Pread})
    for (IoFault fault : {IoFault::Error, IoFault::Short}) {
      EngineOptions o;
      o.backend = "cpu";
      o.ctx = 128;
      o.expert_slots = 2;
      o.expert_io = io;
      auto engine = Engine::open(forms.back().path, o);
      Session s(*engine);
      std::vector<float> logits(static_cast<size_t>(engine->cfg().n_vocab), 0.0f);
      set_io_fault(fault, 3);
      const std::string what = std::string(expert_io_name(io)) +
                               (fault == IoFault::Error ? ", read error" : ", short read");
      try {
        for (int32_t id : ids) s.feed(&id, 1, logits.data(), false);
        set_io_fault(IoFault::None);
        FAIL() << what << ": generation succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Runtime) << what;
        const std::string msg = e.what();
        EXPECT_NE(msg.find("expert"), std::string::npos) << what << ": " << msg;
        EXPECT_NE(msg.find(fault == IoFault::Error ? "read failed" : "short read"),
                  std::string::npos)
            << what << ": " << msg;
      }
    }
}

}  // namespace
}  // namespace ts

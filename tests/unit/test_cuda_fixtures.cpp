// The CUDA backend end to end (ctest label `cuda`; skips without a device): every family fixture
// against the Hugging Face reference in prefill and decode, CUDA against CPU, rope scaling against
// transformers, streaming on the GPU bit-identical to resident on the GPU, decode (one sequence,
// or several together) replayed from CUDA graphs bit-identical to eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "core/error.h"
#include "fixture_models.h"
#include "model/synth_model.h"
#include "rope_scaling_cases.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "test_paths.h"

namespace ts {
namespace {

// f16 weights, and MXFP4 experts in prefill (dequantised to f16 for the tensor cores, the
// activations rounded to f16 with them), are held to f16's bound; decode's MXFP4 GEMV multiplies
// in f32, as the reference.
double tolerance(const std::string& form, bool decode = false) {
  return form == "f16" || (form == "mxfp4" && !decode) ? 5e-3 : 1e-4;
}

class CudaFixtures : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(CudaFixtures, MatchReferenceAndCpu) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  const std::vector<float> ref = test::read_f32_file(test::fixture_ref_logits(f));
  const int64_t V = static_cast<int64_t>(ref.size() / ids.size());
  const std::vector<float> cpu = test::run_logits(f.path, ids, {});
  // Where the CPU rounds activations to int8 (MXFP4's two planes) its own distance from the
  // reference joins the bound against it: the GPU multiplies those weights in f32.
  const double cpu_own = cpu::takes_f32_activations(DType::MXFP4) || f.form != "mxfp4"
                             ? 0.0
                             : test::compare_logits(cpu, ref, V).rel;
  for (bool decode : {false, true})
    for (int64_t batch : {64, 7}) {
      if (decode && batch != 64) continue;
      const std::vector<float> gpu =
          test::run_logits(f.path, ids, {.backend = "cuda", .batch = batch, .decode = decode});
      const auto c = test::compare_logits(gpu, ref, V);
      EXPECT_LE(c.rel, tolerance(f.form, decode))
          << (decode ? "decode" : "prefill") << " batch " << batch << ": " << c.summary();
      EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
      const auto vs_cpu = test::compare_logits(gpu, cpu, V);
      EXPECT_LE(vs_cpu.rel, tolerance(f.form, decode) + cpu_own)
          << "CUDA vs CPU: " << vs_cpu.summary();
    }
  // The default f16 cache, whose prefill attention runs on the tensor cores (q and the softmax
  // weights rounded to f16): held to the bound of f16 weights against the CPU with the same cache,
  // and against the reference too, unless the cache's rounding alone moves the CPU further than
  // that (Gemma 4's fixture, 0.011): then to the CPU's distance plus that bound.
  const test::LogitsRun f16_cache{.backend = "cuda", .kv = DType::F16};
  const std::vector<float> gpu16 = test::run_logits(f.path, ids, f16_cache);
  const std::vector<float> cpu16 = test::run_logits(f.path, ids, {.kv = DType::F16});
  const double cpu16_rel = test::compare_logits(cpu16, ref, V).rel;
  const double bound16 =
      cpu16_rel <= tolerance("f16") ? tolerance("f16") : cpu16_rel + tolerance("f16");
  const auto c16 = test::compare_logits(gpu16, ref, V);
  EXPECT_LE(c16.rel, bound16) << "f16 cache: " << c16.summary();
  EXPECT_EQ(c16.argmax_mismatches, 0) << "f16 cache: " << c16.summary();
  const auto c16_cpu = test::compare_logits(gpu16, cpu16, V);
  EXPECT_LE(c16_cpu.rel, tolerance("f16")) << "f16 cache, CUDA vs CPU: " << c16_cpu.summary();
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFixtures,
                         ::testing::ValuesIn(test::fixture_forms(
                             {"llama", "llama_rope_llama3", "mistral", "qwen2", "qwen3", "gemma3",
                              "mixtral", "qwen3_moe", "minimax_m2", "qwen3_next", "qwen3_5",
                              "qwen3_5_moe", "gpt_oss", "gpt_oss_mxfp4", "deepseek_v3", "gemma4",
                              "gemma4_moe", "glm4_moe"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

// Rope scaling on the device: linear (gemma3's global layers) and YaRN (qwen3, whose attention
// factor scales the scores) against transformers, prefill and decode, as on the CPU.
TEST(CudaRopeScaling, MatchesTransformers) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  for (const test::RopeScalingCase& rc : {test::gemma3_linear8(), test::qwen3_yarn4()})
    for (const bool decode : {false, true}) {
      test::LogitsRun run = rc.run;
      run.backend = "cuda";
      run.decode = decode;
      const auto c =
          test::compare_logits(test::run_logits(rc.gguf, rc.ids, run), rc.ref, rc.vocab());
      EXPECT_LE(c.rel, 1e-4) << rc.name << (decode ? ", decode: " : ", prefill: ") << c.summary();
      EXPECT_EQ(c.argmax_mismatches, 0) << rc.name << ": " << c.summary();
    }
}

// Synthetic iq4_nl and iq4_xs models (dense and MoE) on the GPU against the CPU, prefill and
// decode: the same weights, the activations rounded differently (int8 per block on the CPU,
// 16-bit or f32 on the GPU), so held as SynthTest holds the 8-bit weight files to the f32 one.
TEST(CudaWeightTypes, Iq4ModelsFollowTheCpu) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int32_t> ids = {1, 300, 301, 302, 400, 401, 402, 500, 7, 260, 511, 3};
  for (const char* shape : {"tiny", "tiny-moe"})
    for (const DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
      const std::string path =
          test::scratch_path(std::string(shape) + "-" + dtype_name(t) + ".gguf");
      write_synth_model({.shape = shape, .dtype = t, .threads = 2}, path);
      const std::vector<float> cpu = test::run_logits(path, ids, {});
      for (const bool decode : {false, true}) {
        const std::vector<float> gpu =
            test::run_logits(path, ids, {.backend = "cuda", .decode = decode});
        double diff = 0, top = 0;
        for (size_t i = 0; i < cpu.size(); ++i) {
          diff = std::max(diff, static_cast<double>(std::fabs(gpu[i] - cpu[i])));
          top = std::max(top, static_cast<double>(std::fabs(cpu[i])));
        }
        EXPECT_LT(diff / top, 0.05) << shape << " " << dtype_name(t) << (decode ? " decode" : "");
      }
      std::filesystem::remove(path);
    }
}

// tiny-deepseek's MLA rows are 320 wide (kv_lora_rank 256 + rope 64), attention heads over 256:
// the CPU's logits with f32 weights and cache (prefill in one pass and in passes of 7, decode) as the f32 fixtures are
// held to the CPU, and with the f16 cache as the f16 ones.
TEST(CudaWideHeads, TinyDeepseekFollowsTheCpu) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::string path = test::scratch_path("tiny-deepseek-f32.gguf");
  write_synth_model({.shape = "tiny-deepseek", .dtype = DType::F32, .threads = 2}, path);
  const std::vector<int32_t> ids = {1, 300, 301, 302, 400, 401, 402, 500, 7, 260, 511, 3};
  const std::vector<float> cpu = test::run_logits(path, ids, {});
  const auto V = static_cast<int64_t>(cpu.size() / ids.size());
  for (const bool decode : {false, true})
    for (const int64_t batch : {64, 7}) {
      if (decode && batch != 64) continue;
      const auto c = test::compare_logits(
          test::run_logits(path, ids, {.backend = "cuda", .batch = batch, .decode = decode}), cpu,
          V);
      EXPECT_LE(c.rel, tolerance("f32", decode))
          << (decode ? "decode" : "prefill") << " batch " << batch << ": " << c.summary();
      EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
    }
  const auto c16 =
      test::compare_logits(test::run_logits(path, ids, {.backend = "cuda", .kv = DType::F16}),
                           test::run_logits(path, ids, {.kv = DType::F16}), V);
  EXPECT_LE(c16.rel, tolerance("f16")) << "f16 cache: " << c16.summary();
  std::filesystem::remove(path);
}

TEST(CudaStreaming, BitIdenticalToResidentOnTheGpu) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  for (const auto& f : test::fixture_forms(
           {"mixtral", "qwen3_moe", "minimax_m2", "gpt_oss_mxfp4", "deepseek_v3", "gemma4_moe"})) {
    const std::vector<int32_t> ids = test::fixture_prompt(f);
    const int64_t slots = f.fixture == "gpt_oss_mxfp4" ? 4 : 2;  // top-k of 4 there
    for (bool decode : {false, true}) {
      const std::vector<float> resident =
          test::run_logits(f.path, ids, {.backend = "cuda", .batch = 16, .decode = decode});
      const std::vector<float> streamed = test::run_logits(
          f.path, ids, {.backend = "cuda", .batch = 16, .decode = decode, .slots = slots});
      EXPECT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
          << f.fixture << "_" << f.form << (decode ? " decode" : " prefill");
      // Through a pinned RAM tier that holds every expert (1 GiB is more than these hold).
      const std::vector<float> tiered = test::run_logits(f.path, ids,
                                                         {.backend = "cuda",
                                                          .batch = 16,
                                                          .decode = decode,
                                                          .slots = slots,
                                                          .ram_budget = uint64_t{1} << 30});
      EXPECT_EQ(0, std::memcmp(resident.data(), tiered.data(), resident.size() * sizeof(float)))
          << f.fixture << "_" << f.form << (decode ? " decode" : " prefill") << ", RAM tier";
    }
  }
}

// A batched decode step of three sequences on the GPU: resident, each token's experts run by id;
// streamed (two slots), grouped on the host as one-row groups. The same bits.
TEST(CudaStreaming, BatchedDecodeBitIdenticalToResident) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int32_t> next = {3, 1, 4};
  for (const auto& f : test::fixture_forms({"mixtral", "qwen3_moe", "deepseek_v3", "gemma4_moe"})) {
    const std::vector<int32_t> ids = test::fixture_prompt(f);
    const auto batched = [&](int64_t slots) {
      EngineOptions o;
      o.backend = "cuda";
      o.ctx = 64;
      o.expert_slots = slots;
      auto engine = Engine::open(f.path, o);
      const auto V = static_cast<size_t>(engine->cfg().n_vocab);
      Forward forward(*engine, 16);
      std::vector<std::unique_ptr<KvCache>> kv;
      std::vector<float> logits(3 * V);
      std::vector<SeqChunk> step;
      for (size_t s = 0; s < 3; ++s) {
        kv.push_back(std::make_unique<KvCache>(*engine, 64));
        forward.run(
            {SeqChunk{kv[s].get(), ids.data() + s, 5 + static_cast<int64_t>(s), nullptr, false}});
        step.push_back({kv[s].get(), &next[s], 1, logits.data() + s * V, false});
      }
      forward.run(step);
      return logits;
    };
    const std::vector<float> resident = batched(0);
    const std::vector<float> streamed = batched(2);
    EXPECT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
        << f.fixture << "_" << f.form;
  }
}

TEST(CudaGraphs, ReplayedDecodeIsBitIdenticalToEager) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  for (const auto& f :
       test::fixture_forms({"llama", "qwen3", "gemma3", "deepseek_v3", "gemma4", "gemma4_moe"})) {
    const std::vector<int32_t> ids = test::fixture_prompt(f);
    const test::LogitsRun run{.backend = "cuda", .decode = true, .kv = DType::F16};
    ASSERT_EQ(0, setenv("TURBOSPARK_CUDA_GRAPHS", "0", 1));
    const std::vector<float> eager = test::run_logits(f.path, ids, run);
    ASSERT_EQ(0, unsetenv("TURBOSPARK_CUDA_GRAPHS"));
    const std::vector<float> replayed = test::run_logits(f.path, ids, run);
    EXPECT_EQ(0, std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)))
        << f.fixture << "_" << f.form;
  }
}

// Three sequences decoding together for four steps: the first step runs eagerly, the second is
// recorded, the rest replay it. Every step's logits as those of graphs off.
TEST(CudaGraphs, ReplayedBatchedDecodeIsBitIdenticalToEager) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  constexpr size_t kSeqs = 3, kSteps = 4;
  for (const auto& f : test::fixture_forms({"llama", "qwen3_moe", "deepseek_v3", "gemma4"})) {
    const std::vector<int32_t> ids = test::fixture_prompt(f);
    const auto decode = [&] {
      EngineOptions o;
      o.backend = "cuda";
      o.ctx = 64;
      auto engine = Engine::open(f.path, o);
      const auto V = static_cast<size_t>(engine->cfg().n_vocab);
      Forward forward(*engine, 16);
      std::vector<std::unique_ptr<KvCache>> kv;
      for (size_t s = 0; s < kSeqs; ++s) {
        kv.push_back(std::make_unique<KvCache>(*engine, 64));
        forward.run(
            {SeqChunk{kv[s].get(), ids.data() + s, 4 + static_cast<int64_t>(s), nullptr, false}});
      }
      std::vector<float> logits(kSteps * kSeqs * V);
      for (size_t t = 0; t < kSteps; ++t) {
        std::vector<SeqChunk> step;
        for (size_t s = 0; s < kSeqs; ++s)
          step.push_back(
              {kv[s].get(), ids.data() + t + s, 1, logits.data() + (t * kSeqs + s) * V, false});
        forward.run(step);
      }
      return logits;
    };
    ASSERT_EQ(0, setenv("TURBOSPARK_CUDA_GRAPHS", "0", 1));
    const std::vector<float> eager = decode();
    ASSERT_EQ(0, unsetenv("TURBOSPARK_CUDA_GRAPHS"));
    const std::vector<float> replayed = decode();
    EXPECT_EQ(0, std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)))
        << f.fixture << "_" << f.form;
  }
}

}  // namespace
}  // namespace ts

// The bench command and what it divides by: per-token bytes and FLOPs counted by hand for a
// synthetic model, plausible measured bandwidth and peaks, and `turbospark bench --json` on the
// bundled model (in well under a minute) and on a streamed MoE model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/model_spec.h"
#include "model/synth_model.h"
#include "runtime/bandwidth.h"
#include "runtime/roofline.h"
#include "test_paths.h"

namespace ts {
namespace {

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ts_bench_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string synth(const std::string& shape, int64_t layers = 0) {
    SynthOptions o;
    o.shape = shape;
    o.dtype = DType::Q8_0;
    o.threads = 2;
    o.layers = layers;
    const std::string path = (dir_ / (shape + ".gguf")).string();
    write_synth_model(o, path);
    return path;
  }

  nlohmann::json bench_json(const std::string& args) {
    std::string out;
    const int rc =
        test::run_command(test::binary_path() + " bench --json " + args + " 2>/dev/null", &out);
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out);
  }

  std::filesystem::path dir_;
};

// q8_0 stores 32 elements in 34 bytes, so a row of n elements is n / 32 * 34 bytes.
constexpr uint64_t q8(uint64_t n) {
  return n / 32 * 34;
}

TEST_F(BenchTest, DecodeBytesAndFlopsOfTheTinyShape) {
  // tiny: hidden 256, 4 heads / 2 kv heads of 64, FFN 512, vocab 512, 2 layers, tied head.
  auto spec = open_model_spec(synth("tiny"));
  const uint64_t norms = 2 * 256 * 4;
  const uint64_t attn = 256 * q8(256) + 2 * 128 * q8(256) + 256 * q8(256);
  const uint64_t ffn = 2 * 512 * q8(256) + 256 * q8(512);
  const uint64_t head = 512 * q8(256) + 256 * 4;  // the tied embeddings, read whole, + output norm
  const uint64_t embedding_row = q8(256);
  const DecodeBytes b = decode_bytes(*spec, DType::F16, 10);
  EXPECT_EQ(b.weights, 2 * (norms + attn + ffn) + head + embedding_row);
  EXPECT_EQ(b.experts, 0u);
  // 10 positions of K and V rows of 2 x 64 f16 values, per layer.
  EXPECT_DOUBLE_EQ(b.kv, 2 * (2 * 10 * 128 * 2));

  // 4 tokens from position 0: matrices per token, q.k and p.v over 1 + 2 + 3 + 4 positions of
  // 4 heads x 64, and the head once.
  const double matrix_macs = 256 * 256 + 2 * 128 * 256 + 256 * 256 + 3 * 512 * 256;
  const double attention_macs = 2 * 4 * 64 * (1 + 2 + 3 + 4);
  const double head_macs = 256 * 512;
  const FeedFlops f = feed_flops(*spec, 0, 4);
  EXPECT_DOUBLE_EQ(f.matrix, 2 * (2 * 4 * matrix_macs + head_macs));
  EXPECT_DOUBLE_EQ(f.attention, 2 * 2 * attention_macs);
}

TEST_F(BenchTest, DecodeBytesCountTopKExperts) {
  // tiny-moe: 8 experts of 256 per layer, 2 used; q/k norms; untied head.
  auto spec = open_model_spec(synth("tiny-moe"));
  const uint64_t expert = 2 * 256 * q8(256) + 256 * q8(256);
  const DecodeBytes b = decode_bytes(*spec, DType::F32, 1);
  EXPECT_EQ(b.experts, 2 * 2 * expert);
  const uint64_t router = 8 * 256 * 4;  // f32
  const uint64_t norms = 2 * 256 * 4 + 2 * 64 * 4;
  const uint64_t attn = 256 * q8(256) + 2 * 128 * q8(256) + 256 * q8(256);
  EXPECT_EQ(b.weights, 2 * (router + norms + attn) + 512 * q8(256) + 256 * 4 + q8(256));
  EXPECT_DOUBLE_EQ(b.kv, 2 * (2 * 1 * 128 * 4));
}

TEST(Bandwidth, MeasuredFiguresArePhysical) {
  const ReadBandwidth bw = measure_read_bandwidth(1, 64u << 20, 2);
  EXPECT_EQ(bw.buffer_bytes, 64u << 20);
  EXPECT_EQ(bw.threads, 1);
  // Between a slow disk and the fastest caches: the loads really ran.
  EXPECT_GT(bw.bytes_per_s, 5e8);
  EXPECT_LT(bw.bytes_per_s, 1e12);
  const ComputePeak p = measure_compute_peak(1);
  // One core at <= 6 GHz retires at most four 512-bit FMAs (128 flops) and four 512-bit
  // dot-product instructions (512 ops) per cycle: more means the chains were optimised away.
  EXPECT_GT(p.f32_flops, 1e9);
  EXPECT_LT(p.f32_flops, 6e9 * 128);
  EXPECT_GT(p.int8_ops, 1e9);
  EXPECT_LT(p.int8_ops, 6e9 * 512);
  EXPECT_GE(p.int8_ops_256, 1e9);
}

TEST_F(BenchTest, BundledModelJsonRunsInUnderAMinute) {
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::json j = bench_json("");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 60.0);
  EXPECT_EQ(j["model"]["dtype"], "q8_0");
  EXPECT_EQ(j["config"]["reps"], 5);
  ASSERT_EQ(j["tests"].size(), 2u);
  EXPECT_EQ(j["tests"][0]["test"], "pp512");
  EXPECT_EQ(j["tests"][1]["test"], "tg128");
  for (const auto& t : j["tests"]) {
    EXPECT_EQ(t["samples_ts"].size(), 5u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0);
    EXPECT_GE(t["stddev_ts"].get<double>(), 0);
    // Every expert resident: no lookup misses, nothing read.
    EXPECT_EQ(t["moe"]["misses"], 0);
    EXPECT_EQ(t["moe"]["hit_rate"], 1.0);
  }
}

// --image alone times the vision tower: each image once per repetition, its token count (the
// tiny Gemma 3 tower pools every image to 16) beside the times, and no pp / tg test.
TEST_F(BenchTest, ImageEncodeTimesEachImage) {
  const std::string dir = test::fixtures_dir() + "/models/gemma3_vision";
  const nlohmann::json j = bench_json("-m " + dir + "/hf -p 0 -n 0 -r 2 --image " + dir +
                                      "/image0.png --image " + dir + "/image1.png");
  EXPECT_TRUE(j["tests"].empty());
  ASSERT_EQ(j["images"].size(), 2u);
  EXPECT_EQ(j["images"][0]["file"], "image0.png");
  EXPECT_EQ(j["images"][1]["file"], "image1.png");
  for (const auto& im : j["images"]) {
    EXPECT_EQ(im["tokens"], 16);
    EXPECT_EQ(im["samples_ms"].size(), 2u);
    EXPECT_GT(im["avg_ms"].get<double>(), 0);
  }
  std::string out;
  EXPECT_NE(test::run_command(test::binary_path() + " bench -m " + dir + "/hf -p 0 -n 0 --mmproj " +
                                  dir + "/mmproj-f32.gguf 2>&1",
                              &out),
            0);
  EXPECT_NE(out.find("--mmproj without --image"), std::string::npos) << out;
}

TEST_F(BenchTest, StreamedMoeReportsReadsAndRoofline) {
  const std::string model = synth("tiny-moe");
  const nlohmann::json j =
      bench_json("-m " + model + " -p 32 -n 16 -r 2 -t 2 --expert-slots 2 --roofline");
  EXPECT_EQ(j["config"]["expert_slots"], "2");
  EXPECT_GT(j["machine"]["read_bandwidth_gbps"].get<double>(), 0);
  EXPECT_GT(j["machine"]["int8_peak_gops"].get<double>(), 0);
  for (const auto& t : j["tests"]) {
    // Two slots for 8 experts of which 2 are used: random tokens miss often.
    EXPECT_GT(t["moe"]["misses"].get<int64_t>(), 0) << t["test"];
    EXPECT_LT(t["moe"]["hit_rate"].get<double>(), 1.0) << t["test"];
    EXPECT_GT(t["moe"]["bytes_read_per_token"].get<double>(), 0) << t["test"];
    EXPECT_GT(t["roofline"]["bound_ts"].get<double>(), 0) << t["test"];
    EXPECT_GT(t["roofline"]["fraction"].get<double>(), 0) << t["test"];
  }
  EXPECT_EQ(j["tests"][0]["roofline"]["peak"], "int8");
  EXPECT_GT(j["tests"][1]["roofline"]["expert_bytes"].get<double>(), 0);

  std::string out;
  EXPECT_EQ(test::run_command(test::binary_path() + " bench -m " + model + " -p 8 -n 4 -r 1", &out),
            0)
      << out;
  EXPECT_NE(out.find("| pp8 |"), std::string::npos) << out;
  EXPECT_NE(out.find("| tg4 |"), std::string::npos) << out;
  EXPECT_NE(out.find("hit %"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::binary_path() + " bench -m " + model + " -p 0 -n 0", &out), 1)
      << out;
}

// tg with several sequences decoding together: one test, named for both counts, whose tokens/s
// counts every sequence's tokens; --roofline (one sequence's bound) is refused with it.
TEST_F(BenchTest, ParallelDecodeIsOneTestOverEverySequence) {
  const nlohmann::json j = bench_json("-p 0 -n 8 -r 2 -t 2 --parallel 3");
  ASSERT_EQ(j["tests"].size(), 1u);
  EXPECT_EQ(j["tests"][0]["test"], "tg8x3");
  EXPECT_EQ(j["tests"][0]["samples_ts"].size(), 2u);
  EXPECT_GT(j["tests"][0]["avg_ts"].get<double>(), 0);
  std::string out;
  EXPECT_EQ(
      test::run_command(test::binary_path() + " bench -p 0 -n 8 --parallel 2 --roofline", &out), 1)
      << out;
  EXPECT_NE(out.find("--roofline bounds one sequence's decode"), std::string::npos) << out;
}

// An encoder model runs its embedding test: N texts of P tokens a pass, tokens/s over all of
// them, against the f32 peak with --roofline; what does not apply to an encoder is refused.
TEST_F(BenchTest, EncoderRunsItsEmbeddingTest) {
  const std::string model = test::fixtures_dir() + "/models/nomic_bert/model-f32.gguf";
  const nlohmann::json j = bench_json("-m " + model + " -p 16 --parallel 3 -r 2 -t 2 --roofline");
  EXPECT_EQ(j["family"], "nomic-bert");
  ASSERT_EQ(j["tests"].size(), 1u);
  const nlohmann::json& t = j["tests"][0];
  EXPECT_EQ(t["test"], "emb 16 x 3");
  EXPECT_EQ(t["samples_ts"].size(), 2u);
  EXPECT_GT(t["avg_ts"].get<double>(), 0);
  EXPECT_GT(j["machine"]["f32_peak_gflops"].get<double>(), 0);
  EXPECT_NEAR(t["roofline"]["fraction"].get<double>(),
              t["avg_ts"].get<double>() / t["roofline"]["bound_ts"].get<double>(), 1e-9);
  std::string out;
  EXPECT_EQ(test::run_command(test::binary_path() + " bench -m " + model + " -p 4000 2>&1", &out),
            1)
      << out;
  EXPECT_NE(out.find("4000 tokens exceed the encoder's 2048 positions"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::binary_path() + " bench -m " + model + " -d 8 2>&1", &out), 1)
      << out;
  EXPECT_NE(out.find("is an encoder model: --depth and --image do not apply"), std::string::npos)
      << out;
}

// --depth: both tests after one prefilled context, named as llama-bench names them; the decode's
// bound reads the depth's KV rows; a model with recurrent layers returns to its checkpoint there.
TEST_F(BenchTest, DepthRunsBothTestsAfterOnePrefilledContext) {
  const std::string model = synth("tiny");
  const nlohmann::json j = bench_json("-m " + model + " -p 8 -n 4 -r 2 -t 2 -d 48 --roofline");
  ASSERT_EQ(j["tests"].size(), 2u);
  EXPECT_EQ(j["tests"][0]["test"], "pp8 @ d48");
  EXPECT_EQ(j["tests"][1]["test"], "tg4 @ d48");
  EXPECT_EQ(j["config"]["depth"], 48);
  EXPECT_EQ(j["depth_prefill"]["tokens"], 48);
  EXPECT_GT(j["depth_prefill"]["seconds"].get<double>(), 0);
  ASSERT_EQ(j["config"]["kv_type"], "f16");
  auto spec = open_model_spec(model);
  // Decoding 4 tokens after 48 attends to 48 + (4 + 1) / 2 positions on average.
  EXPECT_DOUBLE_EQ(j["tests"][1]["roofline"]["kv_bytes"].get<double>(),
                   decode_bytes(*spec, DType::F16, 48 + 2.5).kv);
  EXPECT_DOUBLE_EQ(j["tests"][0]["roofline"]["flops_per_token"].get<double>(),
                   feed_flops(*spec, 48, 8).total() / 8);
  // Each decoded token's arithmetic, averaged: its attention grows with the positions before it.
  double attention = 0;
  for (int64_t i = 0; i < 4; ++i) attention += feed_flops(*spec, 48 + i, 1).attention / 4;
  EXPECT_NEAR(j["tests"][1]["roofline"]["attention_flops_per_token"].get<double>(), attention,
              1e-9 * attention);
  EXPECT_GT(feed_flops(*spec, 51, 1).attention, feed_flops(*spec, 48, 1).attention);
  const std::string bound_by = j["tests"][1]["roofline"]["bound_by"];
  EXPECT_TRUE(bound_by == "memory" || bound_by == "compute") << bound_by;

  const std::string hybrid = test::fixtures_dir() + "/models/qwen3_5/model-f32.gguf";
  const nlohmann::json h = bench_json("-m " + hybrid + " -p 4 -n 4 -r 2 -t 2 -d 24");
  EXPECT_EQ(h["tests"][1]["test"], "tg4 @ d24");
  EXPECT_EQ(h["tests"][1]["samples_ts"].size(), 2u);

  // A MoE family's file cut to its dense layer has no experts to report.
  const nlohmann::json dense =
      bench_json("-m " + synth("tiny-deepseek", 1) + " -p 4 -n 4 -r 1 -d 8");
  EXPECT_FALSE(dense["tests"][1].contains("moe"));

  std::string out;
  EXPECT_EQ(test::run_command(
                test::binary_path() + " bench -m " + model + " -n 4 -d 8 --parallel 2 2>&1", &out),
            1);
  EXPECT_NE(out.find("--depth runs one sequence"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(
                test::binary_path() + " bench -m " + model + " -n 4 -d 8 --tg-prompt 4 2>&1", &out),
            1);
  EXPECT_NE(out.find("--tg-prompt excludes --depth"), std::string::npos) << out;
}

}  // namespace
}  // namespace ts

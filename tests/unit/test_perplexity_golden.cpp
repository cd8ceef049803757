// Perplexity goldens on the trained tiny MoE model, frozen against independent figures:
// llama.cpp's own perplexity tool on the same GGUF files (its method, valid.txt, -c 256) and the
// Hugging Face float32 reference (every position scored over valid.tokens.u16, -c 256). Streaming
// with top-k slots must give exactly the resident figure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/perplexity.h"
#include "test_paths.h"

namespace ts {
namespace {

// llama.cpp build 9749: llama-perplexity -f valid.txt -c 256 -b 256 (shared/models/tiny-moe/quants)
constexpr double kLlamaCppQ8_0 = 118.0757;
constexpr double kLlamaCppBf16 = 118.1794;
// transformers float32, every position after the first of each 256-token window (tiny-moe README)
constexpr double kHfScoreAll = 50.01;

// The corpus's tokens as the reference scored them (the tokenizer's ids fit 16 bits: uint16 LE,
// half the size of the int32 stream), the first `limit` of them (0: all).
std::vector<int32_t> corpus_tokens(size_t limit = 0) {
  std::ifstream in(test::fixtures_dir() + "/corpus/valid.tokens.u16", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), {});
  EXPECT_FALSE(raw.empty()) << "corpus/valid.tokens.u16 is missing";
  std::vector<uint16_t> ids(raw.size() / 2);
  std::memcpy(ids.data(), raw.data(), ids.size() * 2);
  if (limit > 0 && limit < ids.size()) ids.resize(limit);
  return {ids.begin(), ids.end()};
}

std::unique_ptr<Engine> open(const std::string& path, int64_t slots) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 256;
  o.expert_slots = slots;
  return Engine::open(path, o);
}

PerplexityResult score_all(const std::string& path, int64_t slots) {
  auto engine = open(path, slots);
  const std::vector<int32_t> tokens = corpus_tokens();
  PerplexityOptions o;
  o.ctx = 256;
  o.scoring = PerplexityScoring::All;
  return perplexity(*engine, tokens, o);
}

void expect_within(double got, double want, double frac) {
  EXPECT_LE(std::fabs(got - want) / want, frac) << "perplexity " << got << ", reference " << want;
}

const std::string kBundled = test::repo_dir() + "/models/tiny-moe-q8_0.gguf";

TEST(PerplexityGolden, Q8_0LlamaCppMethod) {
  expect_within(test::llama_cpp_method_ppl(kBundled, 0), kLlamaCppQ8_0, 0.005);
}

TEST(PerplexityGolden, Q8_0LlamaCppMethodStreamingTopKSlots) {
  expect_within(test::llama_cpp_method_ppl(kBundled, 2), kLlamaCppQ8_0, 0.005);
}

TEST(PerplexityGolden, Q8_0ScoreAllMatchesHuggingFace) {
  const PerplexityResult r = score_all(kBundled, 3);
  expect_within(r.ppl, kHfScoreAll, 0.005);
  EXPECT_EQ(r.windows, 877);
  EXPECT_EQ(r.scored, 877 * 255);
}

TEST(PerplexityGolden, StreamingGivesExactlyTheResidentFigure) {
  auto prefix = [](int64_t slots) {
    auto engine = open(kBundled, slots);
    const std::vector<int32_t> tokens = corpus_tokens(256 * 12);
    PerplexityOptions o;
    o.ctx = 256;
    return perplexity(*engine, tokens, o).ppl;
  };
  const double resident = prefix(0);
  for (int64_t slots : {2, 3, 5}) EXPECT_EQ(prefix(slots), resident) << slots << " slots";
}

TEST(PerplexityGolden, Bf16LlamaCppMethod) {
  const std::string path = test::shared_path("models/tiny-moe/model-bf16.gguf");
  TS_REQUIRE_SHARED(path);
  expect_within(test::llama_cpp_method_ppl(path, 0), kLlamaCppBf16, 0.005);
}

TEST(PerplexityGolden, Bf16ScoreAllStreaming) {
  const std::string path = test::shared_path("models/tiny-moe/model-bf16.gguf");
  TS_REQUIRE_SHARED(path);
  expect_within(score_all(path, 2).ppl, kHfScoreAll, 0.005);
}

}  // namespace
}  // namespace ts

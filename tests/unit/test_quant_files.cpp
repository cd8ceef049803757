// The quantised GGUFs of tiny-moe that llama.cpp's llama-quantize made (shared data; each file
// mixes block types, e.g. Q4_K_M stores ffn_down_exps as q5_0): logits on the 32-token prompt
// against the HF float32 reference, and llama.cpp-method perplexity within 0.5 % of llama.cpp's
// own figure on the same file (Q4_K_M here; every file in test_quant_files_slow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

struct QuantFile {
  const char* name;
  double llama_cpp_ppl;  // llama-perplexity -f valid.txt -c 256 (shared/models/tiny-moe/quants)
  double max_mean_kl;    // twice what this engine measured when the test was frozen
};

const QuantFile kFiles[] = {{"Q4_0", 119.8001, 0.026},
                            {"Q4_K_M", 118.4862, 0.011},
                            {"Q5_1", 119.1273, 0.006},
                            {"Q6_K", 118.4096, 0.0022}};

std::string quant_path(const char* name) {
  return test::shared_path(std::string("models/tiny-moe/quants/tiny-moe-") + name + ".gguf");
}

// Only in the default executable: test_quant_files_slow includes this file, and a second test
// of the same name would take its `slow` label.
#ifndef TS_QUANT_FILES_ALL
std::unique_ptr<Engine> open(const std::string& path) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 256;
  o.prefill_batch = 256;
  o.kv_type = DType::F32;
  return Engine::open(path, o);
}

// Rows whose argmax differs from the reference although the reference's top-1/top-2 gap is more
// than 4x the row's RMS logit error (mean-centred): a flip there is not quantisation noise. (The
// flips measured all sit on gaps of 0.05..0.45 logits against errors of 0.06..0.25; a count
// frozen per file instead broke whenever a kernel's rounding changed.)
int64_t decidable_argmax_mismatches(const std::vector<float>& x, const std::vector<float>& ref,
                                    int64_t V) {
  int64_t bad = 0;
  for (size_t r = 0; r < ref.size() / static_cast<size_t>(V); ++r) {
    const float* a = x.data() + r * static_cast<size_t>(V);
    const float* b = ref.data() + r * static_cast<size_t>(V);
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < V; ++i) mean += a[i] - b[i];
    mean /= static_cast<double>(V);
    for (int64_t i = 0; i < V; ++i) sq += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
    const double err = std::sqrt(sq / static_cast<double>(V));
    const auto top_ref = std::max_element(b, b + V) - b;
    float second = -INFINITY;
    for (int64_t i = 0; i < V; ++i)
      if (i != top_ref) second = std::max(second, b[i]);
    const auto top_x = std::max_element(a, a + V) - a;
    if (b[top_ref] - second > 4 * err && top_x != top_ref) ++bad;
  }
  return bad;
}

TEST(QuantFiles, PromptLogitsStayCloseToTheReference) {
  std::ifstream in(test::fixtures_dir() + "/tiny-moe/prompt.json");
  const auto ids = nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
  const std::vector<float> ref =
      test::read_f32_file(test::fixtures_dir() + "/tiny-moe/ref_logits_prompt32.f32");
  for (const QuantFile& q : kFiles) {
    const std::string path = quant_path(q.name);
    TS_REQUIRE_SHARED(path);
    auto engine = open(path);
    Session s(*engine);
    const int64_t V = engine->cfg().n_vocab;
    std::vector<float> logits(ids.size() * static_cast<size_t>(V));
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
    EXPECT_LE(test::mean_kl(logits, ref, V), q.max_mean_kl) << q.name;
    EXPECT_EQ(decidable_argmax_mismatches(logits, ref, V), 0) << q.name;
  }
}
#endif

void check_ppl(const QuantFile& q) {
  const std::string path = quant_path(q.name);
  TS_REQUIRE_SHARED(path);
  const double ppl = test::llama_cpp_method_ppl(path, 0);
  EXPECT_LE(std::fabs(ppl - q.llama_cpp_ppl) / q.llama_cpp_ppl, 0.005) << q.name << ": " << ppl;
}

#ifdef TS_QUANT_FILES_ALL
TEST(QuantFilesSlow, EveryFilePerplexityMatchesLlamaCpp) {
  for (const QuantFile& q : kFiles) check_ppl(q);
}
#else
TEST(QuantFiles, Q4_K_MPerplexityMatchesLlamaCpp) {
  check_ppl(kFiles[1]);
}
#endif

}  // namespace
}  // namespace ts

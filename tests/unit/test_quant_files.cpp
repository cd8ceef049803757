// The quantised GGUFs of tiny-moe that llama.cpp's llama-quantize made (shared data; each file
// mixes block types, e.g. Q4_K_M stores ffn_down_exps as q5_0): logits on the 32-token prompt
// against the HF float32 reference, and llama.cpp-method perplexity within 0.5 % of llama.cpp's
// own figure on the same file (Q4_K_M here; every file in test_quant_files_slow).
#include <gtest/gtest.h>

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
  int64_t max_argmax_mismatches;  // of the 32 prompt rows, as measured when frozen
};

const QuantFile kFiles[] = {{"Q4_0", 119.8001, 0.026, 2},
                            {"Q4_K_M", 118.4862, 0.011, 1},
                            {"Q5_1", 119.1273, 0.006, 2},
                            {"Q6_K", 118.4096, 0.0022, 1}};

std::string quant_path(const char* name) {
  return test::shared_path(std::string("models/tiny-moe/quants/tiny-moe-") + name + ".gguf");
}

std::unique_ptr<Engine> open(const std::string& path) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 256;
  o.prefill_batch = 256;
  o.kv_type = DType::F32;
  return Engine::open(path, o);
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
    EXPECT_LE(test::compare_logits(logits, ref, V).argmax_mismatches, q.max_argmax_mismatches)
        << q.name;
  }
}

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

// The quantised GGUFs of tiny-moe that llama.cpp's llama-quantize made (shared data; each file
// mixes block types, e.g. Q4_K_M stores ffn_down_exps as q5_0): logits on the 32-token prompt
// against the HF float32 reference, and llama.cpp-method perplexity within 0.5 % of llama.cpp's
// own figure on the same file (Q4_K_M here; every file in test_quant_files_slow).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/model_tokenizer.h"
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

double mean_kl(const std::vector<float>& x, const std::vector<float>& ref, int64_t V) {
  const size_t rows = ref.size() / static_cast<size_t>(V);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * static_cast<size_t>(V);
    const float* b = x.data() + r * static_cast<size_t>(V);
    const double ma = *std::max_element(a, a + V), mb = *std::max_element(b, b + V);
    double za = 0, zb = 0;
    for (int64_t i = 0; i < V; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
    for (int64_t i = 0; i < V; ++i) {
      const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
      total += std::exp(la) * (la - lb);
    }
  }
  return total / static_cast<double>(rows);
}

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
    EXPECT_LE(mean_kl(logits, ref, V), q.max_mean_kl) << q.name;
    EXPECT_LE(test::compare_logits(logits, ref, V).argmax_mismatches, q.max_argmax_mismatches)
        << q.name;
  }
}

double llama_cpp_method(const std::string& path) {
  auto engine = open(path);
  const Tokenizer tok = load_tokenizer(engine->spec());
  std::ifstream in(test::fixtures_dir() + "/corpus/valid.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  PerplexityOptions o;
  o.ctx = 256;
  o.bos = tok.bos();
  return perplexity(*engine, tok.encode(text, tok.add_bos(), false), o).ppl;
}

void check_ppl(const QuantFile& q) {
  const std::string path = quant_path(q.name);
  TS_REQUIRE_SHARED(path);
  const double ppl = llama_cpp_method(path);
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

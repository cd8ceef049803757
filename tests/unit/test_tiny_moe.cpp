// The trained tiny MoE model (the bundled q8_0 GGUF, and the bf16 one when the shared data is
// present) against its Hugging Face float32 reference: logits on the 32-token prompt within the
// fixtures README's bounds for the file's precision, and greedy decoding equal to HF's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

nlohmann::json prompt_json() {
  std::ifstream in(test::fixtures_dir() + "/tiny-moe/prompt.json");
  return nlohmann::json::parse(in);
}

// mean over rows of KL(softmax(ref) || softmax(x))
struct Case {
  std::string path;
  double max_rel, max_kl;
  double min_argmax;  // fraction of rows whose argmax must agree
};

void check(const Case& c, int64_t slots) {
  const nlohmann::json p = prompt_json();
  const auto ids = p.at("prompt_ids").get<std::vector<int32_t>>();
  const std::vector<float> ref =
      test::read_f32_file(test::fixtures_dir() + "/tiny-moe/ref_logits_prompt32.f32");
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 128;
  o.kv_type = DType::F32;
  o.expert_slots = slots;
  auto engine = Engine::open(c.path, o);
  const int64_t V = engine->cfg().n_vocab;
  Session s(*engine);
  std::vector<float> logits(ids.size() * static_cast<size_t>(V));
  s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
  const auto cmp = test::compare_logits(logits, ref, V);
  int64_t agree = 0;
  const auto top1 = p.at("reference_top1").get<std::vector<int64_t>>();
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* row = logits.data() + r * static_cast<size_t>(V);
    agree += (std::max_element(row, row + V) - row) == top1[r];
  }
  EXPECT_LE(cmp.rel, c.max_rel) << cmp.summary();
  EXPECT_LE(test::mean_kl(logits, ref, V), c.max_kl);
  EXPECT_GE(static_cast<double>(agree) / static_cast<double>(ids.size()), c.min_argmax);

  // Greedy continuation of 32 tokens (no stop at EOS), through the decode path.
  const auto want = p.at("greedy_ids").get<std::vector<int32_t>>();
  std::vector<float> last(static_cast<size_t>(V));
  std::copy(logits.end() - V, logits.end(), last.begin());
  std::vector<int32_t> got;
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    got.push_back(next);
    s.feed(&next, 1, last.data(), false);
  }
  EXPECT_EQ(got, want);
}

TEST(TinyMoe, BundledQ8_0MatchesReference) {
  // README bounds for q8_0: rel <= 3e-2, argmax >= 95 % of rows, mean KL <= 1e-3.
  check({test::repo_dir() + "/models/tiny-moe-q8_0.gguf", 3e-2, 1e-3, 0.95}, 0);
}

TEST(TinyMoe, BundledQ8_0StreamingWithTopKSlots) {
  check({test::repo_dir() + "/models/tiny-moe-q8_0.gguf", 3e-2, 1e-3, 0.95}, 2);
}

TEST(TinyMoe, Bf16MatchesReference) {
  const std::string path = test::shared_path("models/tiny-moe/model-bf16.gguf");
  TS_REQUIRE_SHARED(path);
  // README bounds for bf16: rel <= 1e-2, 100 % argmax, mean KL <= 1e-4.
  check({path, 1e-2, 1e-4, 1.0}, 0);
}

}  // namespace
}  // namespace ts

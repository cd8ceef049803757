// CPU decode and prefill do not depend on the thread count: every op gives each output element to
// one thread with a fixed order of operations, attention splits keys at fixed positions (it used
// to split by the thread count), and the f32 matmul's accumulation no longer follows the shape of
// the tile an output falls in (which follows the pieces each thread takes).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fixture_models.h"

namespace ts {
namespace {

TEST(ThreadInvariance, DecodeLogitsAreIdenticalForOneAndThreeThreads) {
  const auto forms = test::fixture_forms({"llama", "qwen3", "gemma3", "mixtral"});
  ASSERT_FALSE(forms.empty());
  for (const auto& f : forms) {
    // The fixture's prompt repeated past 300 tokens: three key splits, and gemma3's window.
    // Decoded one token at a time: every step's attention over up to 300 keys.
    const std::vector<int32_t> base = test::fixture_prompt(f);
    std::vector<int32_t> ids;
    while (ids.size() < 300) ids.insert(ids.end(), base.begin(), base.end());
    test::LogitsRun run{.decode = true, .ctx = 512, .threads = 1};
    const std::vector<float> one = test::run_logits(f.path, ids, run);
    run.threads = 3;
    const std::vector<float> three = test::run_logits(f.path, ids, run);
    EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)))
        << f.fixture << "_" << f.form;
  }
}

TEST(ThreadInvariance, PrefillLogitsAreIdenticalForOneAndThreeThreads) {
  const auto forms = test::fixture_forms({"llama", "qwen3", "gemma3", "mixtral"});
  ASSERT_FALSE(forms.empty());
  for (const auto& f : forms) {
    const std::vector<int32_t> ids = test::fixture_prompt(f);
    for (const int64_t batch : {int64_t{64}, int64_t{7}}) {
      test::LogitsRun run{.batch = batch, .threads = 1};
      const std::vector<float> one = test::run_logits(f.path, ids, run);
      run.threads = 3;
      const std::vector<float> three = test::run_logits(f.path, ids, run);
      EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)))
          << f.fixture << "_" << f.form << ", prefill batch " << batch;
    }
  }
}

}  // namespace
}  // namespace ts

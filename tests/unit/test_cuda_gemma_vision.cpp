// Gemma 3's and Gemma 4's images on the CUDA backend (ctest label `cuda`; skips without a device):
// `turbospark logits --image` with the tower on the host and the decoder on the GPU (image rows
// attending to their image's later rows through AttentionArgs::key_end; Gemma 4's only on its
// sliding layers, its per-layer inputs taking the pad token at image rows) against the fixture's
// transformers logits, as test_gemma3_vision / test_gemma4_vision check the CPU. Gemma 4's images
// have not yet run on a GPU: refused there unless TURBOSPARK_UNVERIFIED_GPU_OPS=1 asks for them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

struct VisionFixture {
  const char* name;
  int64_t vocab;
  bool verified;  // opens on a GPU without TURBOSPARK_UNVERIFIED_GPU_OPS
};

std::string fixture_dir(const VisionFixture& f) {
  const std::string meta = test::fixture_file(f.name, "meta.json");
  return meta.substr(0, meta.rfind('/'));
}

class CudaGemmaVision : public ::testing::TestWithParam<VisionFixture> {
 protected:
  void SetUp() override {
    if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  }
};

// The prompt in one pass, and in passes of 80 rows (an image then starts a pass whole).
TEST_P(CudaGemmaVision, ImageLogitsMatchReference) {
  const VisionFixture& f = GetParam();
  if (!f.verified) setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1);  // the child inherits it
  for (const std::string& flags : {std::string(), std::string(" --prefill-batch 80")}) {
    const auto c = test::cli_image_logits(fixture_dir(f), " --backend cuda" + flags, f.vocab);
    EXPECT_LE(c.rel, 1e-4) << f.name << " flags '" << flags << "': " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << f.name << " flags '" << flags << "': " << c.summary();
  }
  unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
}

TEST_P(CudaGemmaVision, UnverifiedImagesRefused) {
  const VisionFixture& f = GetParam();
  if (f.verified) GTEST_SKIP() << f.name << " is verified on a GPU";
  unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
  const std::string dir = fixture_dir(f);
  std::string out;
  const int rc = test::run_command(test::binary_path() + " logits -m " + dir +
                                       "/hf --backend cuda --image " + dir +
                                       "/image0.png --tokens 1 --out " +
                                       test::scratch_path("cuda_refused.f32") + " 2>&1",
                                   &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("not yet verified on a GPU"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGemmaVision,
                         ::testing::Values(VisionFixture{"gemma3_vision", 96, true},
                                           VisionFixture{"gemma4_vision", 64, false}),
                         [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ts

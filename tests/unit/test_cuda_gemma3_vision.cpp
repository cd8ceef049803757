// Gemma 3's images on the CUDA backend: `turbospark logits --image` (image rows attending to the
// later rows of their image, AttentionArgs::key_end) against the fixture's transformers logits, as
// test_gemma3_vision.cpp checks the CPU. Until a device run has verified the kernels, the tower is
// refused on a GPU unless TURBOSPARK_UNVERIFIED_GPU_OPS=1 asks for them, which this test does.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

constexpr int64_t kVocab = 96;

// `logits` over the fixture's prompt with its two images, on CUDA with an f32 cache; `env` goes
// before the command. Returns its exit status, the output in *out and the logits in *logits.
int cuda_image_logits(const std::string& env, const std::string& flags, std::string* out,
                      std::vector<float>* logits) {
  const std::string meta_path = test::fixture_file("gemma3_vision", "meta.json");
  const std::string dir = meta_path.substr(0, meta_path.rfind('/'));
  const auto meta = nlohmann::json::parse(std::ifstream(meta_path));
  std::string ids;
  for (int32_t id : meta["image"]["prompt_ids"].get<std::vector<int32_t>>())
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const std::string out_file = test::scratch_path("cuda_gemma3_image.f32");
  const int rc = test::run_command(env + test::binary_path() + " logits -m " + dir +
                                       "/hf --backend cuda --kv-type f32 --image " + dir +
                                       "/image0.png --image " + dir + "/image1.png --tokens " +
                                       ids + " --out " + out_file + flags + " 2>&1",
                                   out);
  if (rc == 0) *logits = test::read_f32_file(out_file);
  return rc;
}

TEST(CudaGemma3Vision, ImagesRefusedUntilVerified) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  std::string out;
  std::vector<float> logits;
  EXPECT_NE(cuda_image_logits("env -u TURBOSPARK_UNVERIFIED_GPU_OPS ", "", &out, &logits), 0)
      << out;
  EXPECT_NE(out.find("not yet verified on a GPU"), std::string::npos) << out;
}

// The prompt in one pass, and in passes of 20 rows (each image then starts a pass whole).
TEST(CudaGemma3Vision, ImageLogitsMatchReference) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const auto ref = test::read_f32_file(test::fixture_file("gemma3_vision", "ref_logits_image.f32"));
  for (const std::string& flags : {std::string(), std::string(" --prefill-batch 20")}) {
    std::string out;
    std::vector<float> logits;
    ASSERT_EQ(cuda_image_logits("TURBOSPARK_UNVERIFIED_GPU_OPS=1 ", flags, &out, &logits), 0)
        << out;
    const auto c = test::compare_logits(logits, ref, kVocab);
    EXPECT_LE(c.rel, 1e-4) << "flags '" << flags << "': " << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << "flags '" << flags << "': " << c.summary();
  }
}

}  // namespace
}  // namespace ts

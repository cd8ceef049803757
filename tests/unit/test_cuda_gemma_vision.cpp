// Gemma 3's and Gemma 4's images (image rows that attend to the later rows of their image; Gemma
// 4's per-layer inputs taking the pad token at image rows) have no verified device path: with a
// CUDA backend, `logits --image` is refused when the tower opens, naming why, before anything
// runs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

class CudaGemmaVision : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGemmaVision, ImagesRefusedOnTheDevice) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::string meta_path = test::fixture_file(GetParam(), "meta.json");
  const std::string dir = meta_path.substr(0, meta_path.rfind('/'));
  const auto meta = nlohmann::json::parse(std::ifstream(meta_path));
  const std::string ids = test::ids_csv(meta["image"]["prompt_ids"].get<std::vector<int32_t>>());
  std::string out;
  const int rc = test::run_command(
      test::binary_path() + " logits -m " + dir + "/hf --backend cuda --image " + dir +
          "/image0.png --image " + dir + "/image1.png --tokens " + ids + " --out " +
          test::scratch_path("cuda_" + GetParam() + "_image.f32") + " 2>&1",
      &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("not yet verified on a GPU"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGemmaVision,
                         ::testing::Values("gemma3_vision", "gemma4_vision"));

}  // namespace
}  // namespace ts

// Gemma 4's images (image rows that attend to the later rows of their image on the sliding
// layers, per-layer inputs taking the pad token at image rows) have no verified device path: with a
// CUDA backend, `logits --image` is refused when the tower opens, naming why, before anything runs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(CudaGemma4Vision, ImagesRefusedOnTheDevice) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::string meta_path = test::fixture_file("gemma4_vision", "meta.json");
  const std::string dir = meta_path.substr(0, meta_path.rfind('/'));
  const auto meta = nlohmann::json::parse(std::ifstream(meta_path));
  std::string ids;
  for (int32_t id : meta["image"]["prompt_ids"].get<std::vector<int32_t>>())
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  std::string out;
  const int rc =
      test::run_command(test::binary_path() + " logits -m " + dir + "/hf --backend cuda --image " +
                            dir + "/image0.png --image " + dir + "/image1.png --tokens " + ids +
                            " --out " + test::scratch_path("cuda_gemma4_image.f32") + " 2>&1",
                        &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("not yet verified on a GPU"), std::string::npos) << out;
}

}  // namespace
}  // namespace ts

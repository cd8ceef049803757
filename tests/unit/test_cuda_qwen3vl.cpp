// Qwen3-VL (M-RoPE positions, DeepStack rows) has no verified device path: the CUDA backend
// refuses it at open, naming why, even where unverified kernels are asked for.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(CudaQwen3Vl, RefusedAtOpen) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1);
  for (const auto& f : test::fixture_forms({"qwen3_vl"})) {
    try {
      test::run_logits(f.path, test::fixture_prompt(f), {.backend = "cuda"});
      ADD_FAILURE() << f.form << ": opened on CUDA";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("not yet verified on a GPU"), std::string::npos)
          << e.what();
    }
  }
  unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
}

}  // namespace
}  // namespace ts

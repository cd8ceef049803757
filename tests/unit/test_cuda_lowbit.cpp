// The low-bit types and MXFP4 on CUDA (ctest label `cuda`; skips without a device or the shared
// data): the low-bit types' device kernels are not yet verified with a model on a GPU, so the
// tiny-moe files that hold them are refused at open unless TURBOSPARK_UNVERIFIED_GPU_OPS=1 asks for
// them; asked, each file's logits on the GPU match the CPU's, and experts streamed on the GPU give
// the resident GPU bits (MXFP4's file too, opened without asking). The files that are here are
// run: a device run carries a few at a time. The kernels themselves are in test_cuda_ops (every
// weight type against a double reference and the CPU, and the grouped experts against their f16
// dequantisation).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

// The files of the low-bit types (refused until verified) and MXFP4's (verified, opened).
const std::vector<std::string> kLowbit = {"IQ1_S", "IQ2_XXS", "IQ2_S", "IQ3_XXS",
                                          "IQ3_S", "TQ1_0",   "TQ2_0"};
const std::vector<std::string> kVerified = {"MXFP4_MOE"};

// The files of `names` that are here (name, path): a device run carries a few at a time.
std::vector<std::pair<std::string, std::string>> present(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& name : names) {
    const std::string path = test::shared_path("models/tiny-moe/quants/tiny-moe-" + name + ".gguf");
    if (!path.empty()) files.emplace_back(name, path);
  }
  return files;
}

std::vector<int32_t> prompt() {
  std::ifstream in(test::fixtures_dir() + "/tiny-moe/prompt.json");
  return nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
}

TEST(CudaLowbit, RefusedUntilVerified) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
  const auto files = present(kLowbit);
  if (files.empty()) GTEST_SKIP() << "shared reference data absent: the tiny-moe low-bit files";
  for (const auto& [name, path] : files) {
    try {
      test::run_logits(path, prompt(), {.backend = "cuda"});
      ADD_FAILURE() << name << ": opened on CUDA";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("not yet verified on a GPU"), std::string::npos)
          << e.what();
    }
  }
}

TEST(CudaLowbit, MatchCpuAndStreamResidentBits) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1);
  const std::vector<int32_t> ids = prompt();
  std::vector<std::string> names = kLowbit;
  names.insert(names.end(), kVerified.begin(), kVerified.end());
  const auto files = present(names);
  if (files.empty()) GTEST_SKIP() << "shared reference data absent: the tiny-moe quantised files";
  for (const auto& [name, path] : files) {
    const std::vector<float> cpu = test::run_logits(path, ids, {});
    const int64_t V = static_cast<int64_t>(cpu.size() / ids.size());
    for (bool decode : {false, true}) {
      const test::LogitsRun run{.backend = "cuda", .batch = decode ? 1 : 64, .decode = decode};
      const std::vector<float> gpu = test::run_logits(path, ids, run);
      // The GPU's dequantised weights are the CPU's bit for bit; what differs is the other
      // tensors' activation rounding (int8 on each side, differently blocked) and summation
      // order. The bound (test_quant_files' Q6_K figure against the HF reference) is a first
      // guess, to be confirmed or set from what the first GPU run measures.
      EXPECT_LE(test::mean_kl(gpu, cpu, V), 0.0022) << name << (decode ? " decode" : " prefill");
      test::LogitsRun streamed = run;
      streamed.slots = 2;
      const std::vector<float> gpu_streamed = test::run_logits(path, ids, streamed);
      EXPECT_EQ(std::memcmp(gpu.data(), gpu_streamed.data(), gpu.size() * sizeof(float)), 0)
          << name << (decode ? " decode" : " prefill") << ": streamed vs resident";
    }
  }
  unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
}

}  // namespace
}  // namespace ts

// The low-bit tiny-moe files llama.cpp's llama-quantize made with an importance matrix (in the
// shared data folder, test::shared_path; 4-8 MB each, too large to keep here: the named type holds
// the expert tensors, other tensors fall back to k-quants, q8_0 or iq4_nl). Default run: each
// opens, its experts streamed through 2 slots a layer give the resident logits bit for bit, in
// prefill and in decode. Slow run (test_lowbit_files_slow): llama.cpp-method perplexity within
// 0.5 % of llama.cpp's own figure on the same file.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixture_models.h"
#include "formats/gguf.h"
#include "test_paths.h"

namespace ts {
namespace {

struct LowbitFile {
  const char* name;
  DType expert_type;     // the type of the expert tensors (llama.cpp's IQ2_S mix stores iq2_xs)
  double llama_cpp_ppl;  // llama-perplexity -f valid.txt -c 256 (the quants README)
};

const LowbitFile kFiles[] = {
    {"IQ1_S", DType::IQ1_S, 146.0999},  {"IQ2_XXS", DType::IQ2_XXS, 134.7719},
    {"IQ2_S", DType::IQ2_XS, 127.7028}, {"IQ3_XXS", DType::IQ3_XXS, 122.1534},
    {"IQ3_S", DType::IQ3_S, 122.1589},  {"TQ1_0", DType::TQ1_0, 568.3761},
    {"TQ2_0", DType::TQ2_0, 568.3761},  {"MXFP4_MOE", DType::MXFP4, 121.1406},
};

std::string quant_path(const char* name) {
  return test::shared_path(std::string("models/tiny-moe/quants/tiny-moe-") + name + ".gguf");
}

#ifndef TS_LOWBIT_FILES_ALL
TEST(LowbitFiles, StreamedExpertsGiveTheResidentLogits) {
  std::ifstream in(test::fixtures_dir() + "/tiny-moe/prompt.json");
  const auto ids = nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
  for (const LowbitFile& f : kFiles) {
    const std::string path = quant_path(f.name);
    TS_REQUIRE_SHARED(path);
    // The file holds the type it is named for (so this test runs that type's kernels).
    bool found = false;
    for (const GgufTensor& t : GgufFile::open(path)->tensors()) found |= t.dtype == f.expert_type;
    EXPECT_TRUE(found) << f.name << " holds no " << dtype_name(f.expert_type) << " tensor";
    const auto resident = test::run_logits(path, ids, {.batch = 16});
    const auto streamed = test::run_logits(path, ids, {.batch = 16, .slots = 2});
    ASSERT_EQ(resident.size(), streamed.size());
    EXPECT_EQ(std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)), 0)
        << f.name;
    // One token at a time too (the GEMV shapes): streamed and resident alike.
    const auto decode = test::run_logits(path, ids, {.batch = 1, .decode = true});
    const auto decode_streamed =
        test::run_logits(path, ids, {.batch = 1, .decode = true, .slots = 2});
    EXPECT_EQ(std::memcmp(decode.data(), decode_streamed.data(), decode.size() * sizeof(float)), 0)
        << f.name << " (decode)";
    for (float v : resident) ASSERT_TRUE(std::isfinite(v)) << f.name;
  }
}
#endif

#ifdef TS_LOWBIT_FILES_ALL
TEST(LowbitFilesSlow, PerplexityMatchesLlamaCpp) {
  for (const LowbitFile& f : kFiles) {
    const std::string path = quant_path(f.name);
    TS_REQUIRE_SHARED(path);
    const double ppl = test::llama_cpp_method_ppl(path, 0);
    std::printf("%s: perplexity %.4f (llama.cpp %.4f)\n", f.name, ppl, f.llama_cpp_ppl);
    EXPECT_LE(std::fabs(ppl - f.llama_cpp_ppl) / f.llama_cpp_ppl, 0.005) << f.name << ": " << ppl;
  }
}
#endif

}  // namespace
}  // namespace ts

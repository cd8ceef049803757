// `turbospark quantize`: the tensor types llama.cpp's llama-quantize gives (against its own files
// of tiny-moe, shared data), the bytes of each tensor the project's quantiser's (a fixture model
// in the repository), the output opening and running, and bad input refused with one line. Slow
// run (test_quantize_cmd_slow): perplexity within 0.5 % of llama.cpp's on its file of each type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fixture_models.h"
#include "formats/gguf.h"
#include "model/quantize_model.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "test_paths.h"

namespace ts {
namespace {

std::string quantize(const std::string& in, const std::string& type, std::string* log = nullptr) {
  const std::string out = test::scratch_path(type + ".gguf");
  std::string l;
  const int rc = test::run_command(
      test::binary_path() + " quantize " + in + " " + out + " " + type + " -t 2", &l);
  EXPECT_EQ(rc, 0) << l;
  if (log != nullptr) *log = l;
  return out;
}

struct LlamaCppFile {
  const char* type;
  const char* file;  // under shared/models/tiny-moe
  double ppl;        // llama.cpp's, -c 256 (the quants README)
};

const LlamaCppFile kLlamaCpp[] = {{"q4_0", "quants/tiny-moe-Q4_0.gguf", 119.8001},
                                  {"q5_1", "quants/tiny-moe-Q5_1.gguf", 119.1273},
                                  {"q6_k", "quants/tiny-moe-Q6_K.gguf", 118.4096},
                                  {"q8_0", "model-q8_0.gguf", 118.0757}};

#ifndef TS_QUANTIZE_CMD_ALL
// Every tensor of the mixtral fixture (f32, 4 experts, rows of 64 and 96) as planned, its bytes
// the quantiser's on the source rows; the output opens and runs.
TEST(QuantizeCmd, BytesAreTheQuantisersOnEveryPlannedTensor) {
  const std::string in = test::fixtures_dir() + "/models/mixtral/model-f32.gguf";
  const std::string out = quantize(in, "q4_0");
  const auto src = GgufFile::open(in);
  const auto q = GgufFile::open(out);
  EXPECT_EQ(q->get_int("general.file_type"), 2);
  ASSERT_EQ(q->tensors().size(), src->tensors().size());
  std::map<std::string, DType> want = {{"output.weight", DType::Q8_0},  // q6_k's fallback
                                       {"token_embd.weight", DType::Q4_0},
                                       {"blk.0.attn_k.weight", DType::Q4_0},
                                       {"blk.0.ffn_down_exps.weight", DType::Q4_0},
                                       {"blk.0.ffn_gate_inp.weight", DType::F32},
                                       {"blk.0.attn_norm.weight", DType::F32}};
  for (const GgufTensor& s : src->tensors()) {
    const GgufTensor* t = q->tensor(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->dims, s.dims);
    if (want.count(s.name)) {
      EXPECT_EQ(t->dtype, want[s.name]) << s.name;
    }
    const int64_t cols = static_cast<int64_t>(s.dims[0]);
    const int64_t rows = static_cast<int64_t>(s.elements()) / cols;
    std::vector<uint8_t> expect(t->nbytes);
    const size_t out_row = row_bytes(t->dtype, s.dims[0], s.name);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(s.dtype, src->tensor_data(s) + r * (s.nbytes / rows), row.data(), cols);
      quantize_row_weights(t->dtype, row.data(), expect.data() + r * out_row, cols);
    }
    EXPECT_EQ(std::memcmp(q->tensor_data(*t), expect.data(), expect.size()), 0) << s.name;
  }
  const auto ids = test::fixture_prompt(test::fixture_forms({"mixtral"}).front());
  for (float v : test::run_logits(out, ids, {})) ASSERT_TRUE(std::isfinite(v));
}

TEST(QuantizeCmd, TensorTypesAreLlamaCpps) {
  const std::string bf16 = test::shared_path("models/tiny-moe/model-bf16.gguf");
  TS_REQUIRE_SHARED(bf16);
  for (const LlamaCppFile& f : kLlamaCpp) {
    const std::string ref_path = test::shared_path(std::string("models/tiny-moe/") + f.file);
    TS_REQUIRE_SHARED(ref_path);
    const auto ref = GgufFile::open(ref_path);
    const auto q = GgufFile::open(quantize(bf16, f.type));
    ASSERT_EQ(q->tensors().size(), ref->tensors().size()) << f.type;
    for (const GgufTensor& r : ref->tensors()) {
      const GgufTensor* t = q->tensor(r.name);
      ASSERT_NE(t, nullptr) << f.type << " " << r.name;
      EXPECT_EQ(dtype_name(t->dtype), std::string(dtype_name(r.dtype))) << f.type << " " << r.name;
    }
  }
}

// gguf-py reads the output as we do: each tensor's type and the sum of its dequantised values
// (gguf-py's numpy dequantisers, an independent reader).
TEST(QuantizeCmd, GgufPyReadsTheOutput) {
  if (test::run_command("python3 -c 'import gguf, numpy'") != 0)
    GTEST_SKIP() << "python3 with gguf-py absent (pip install gguf numpy)";
  const std::string in = test::fixtures_dir() + "/models/mixtral/model-f32.gguf";
  for (const char* type : {"q4_0", "q5_1", "q8_0", "bf16"}) {
    const std::string out = quantize(in, type);
    std::string py;
    ASSERT_EQ(test::run_command("python3 -c \"import sys, numpy as np; "
                                "from gguf import GGUFReader; from gguf.quants import dequantize; "
                                "r = GGUFReader(sys.argv[1]); "
                                "[print(t.name, t.tensor_type.name.lower(), "
                                "repr(float(np.sum(dequantize(t.data, t.tensor_type), "
                                "dtype=np.float64)))) for t in r.tensors]\" " +
                                    out,
                                &py),
              0)
        << py;
    const auto q = GgufFile::open(out);
    std::istringstream lines(py);
    std::string name, dtype;
    double sum = 0;
    size_t n = 0;
    while (lines >> name >> dtype >> sum) {
      const GgufTensor* t = q->tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(dtype, dtype_name(t->dtype)) << name;
      std::vector<float> v(t->elements());
      dequantize_row(t->dtype, q->tensor_data(*t), v.data(), static_cast<int64_t>(v.size()));
      double ours = 0, mag = 0;
      for (float x : v) {
        ours += x;
        mag += std::fabs(x);
      }
      EXPECT_NEAR(ours, sum, 1e-9 * mag + 1e-12) << type << " " << name;
      ++n;
    }
    EXPECT_EQ(n, q->tensors().size()) << py;
  }
}

TEST(QuantizeCmd, BadInputIsOneLine) {
  const std::string in = test::fixtures_dir() + "/models/mixtral/model-f32.gguf";
  std::string log;
  EXPECT_EQ(test::run_command(test::binary_path() + " quantize " + in + " " +
                                  test::scratch_path("x.gguf") + " q9_9",
                              &log),
            1);
  EXPECT_NE(log.find("type 'q9_9' is not one of f16, bf16, q8_0"), std::string::npos) << log;
  const std::string q8 = quantize(in, "q8_0");
  log.clear();
  EXPECT_EQ(test::run_command(test::binary_path() + " quantize " + q8 + " " +
                                  test::scratch_path("y.gguf") + " q4_0",
                              &log),
            2);
  EXPECT_NE(log.find("is q8_0: quantize takes f32, f16 or bf16 weights"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}
#endif

#ifdef TS_QUANTIZE_CMD_ALL
TEST(QuantizeCmdSlow, PerplexityWithinHalfAPercentOfLlamaCpps) {
  const std::string bf16 = test::shared_path("models/tiny-moe/model-bf16.gguf");
  TS_REQUIRE_SHARED(bf16);
  for (const LlamaCppFile& f : kLlamaCpp) {
    const double ppl = test::llama_cpp_method_ppl(quantize(bf16, f.type), 0);
    std::printf("%s: perplexity %.4f (llama.cpp's own file %.4f)\n", f.type, ppl, f.ppl);
    EXPECT_LE(std::fabs(ppl - f.ppl) / f.ppl, 0.005) << f.type << ": " << ppl;
  }
}
#endif

}  // namespace
}  // namespace ts

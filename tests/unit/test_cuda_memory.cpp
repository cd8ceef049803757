// The VRAM gate (ctest label `cuda`; skips without a device): the device memory a CUDA run holds at
// its peak (every cudaMalloc of the backend, counted by its ledger) stays within the footprint the
// engine announces at open, scratch included, and comes close to it once a prompt fills a
// micro-batch. Over the bundled MoE model (resident and streamed) and over synthetic models of
// real shapes whose quantised weights take every scratch path: dense prompts dequantise weight
// chunks for cuBLAS, MoE prompts convert activations for the grouped kernels and dequantise the
// q6_k experts of a Q4_K_M mix in batches; and a server's decode step of several sequences.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "test_paths.h"

namespace ts {
namespace {

// Each device allocation carries 16 zeroed bytes past its end (the GEMV's rounded last load),
// which the footprint does not count: a few hundred allocations a model.
constexpr double kAllocationTails = 1 << 20;
// Rows of the micro-batch: the text below is longer, so every scratch buffer sees a full one.
constexpr int kBatch = 64;

// The text of every run, written once.
const std::string& text_file() {
  static const std::string path = [] {
    const std::string p = test::scratch_path("vram-text.txt");
    std::ofstream out(p);
    for (int i = 0; i < 12; ++i)
      out << "The history of the old city begins with a market by the river, where traders met. ";
    return p;
  }();
  return path;
}

std::string model_flags(const std::string& model, const std::string& extra) {
  return (model.empty() ? "" : " -m " + model) + " --backend cuda --prefill-batch " +
         std::to_string(kBatch) + " " + extra;
}

nlohmann::json parse_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Generation: the prompt in micro-batches, then decode; the head runs on one row.
nlohmann::json generate(const std::string& model, const std::string& extra) {
  const std::string json = test::scratch_path("vram-stats.json");
  std::remove(json.c_str());
  const std::string cmd = test::binary_path() + " run" + model_flags(model, extra) +
                          " -p \"$(cat " + text_file() + ")\" -n 16 --temp 0 -c 2048 " +
                          "--stats-json " + json + " > /dev/null 2>&1";
  EXPECT_EQ(test::run_command(cmd), 0) << cmd;
  return parse_file(json);
}

// Perplexity: the micro-batch of each window's scored half wants the logits of all its rows, so
// the head runs on the tensor cores too (a quantised head is dequantised in chunks, often the
// largest).
nlohmann::json perplexity(const std::string& model, const std::string& extra) {
  const std::string json = test::scratch_path("vram-ppl.json");
  const std::string cmd = test::binary_path() + " perplexity" + model_flags(model, extra) + " -f " +
                          text_file() + " -c 128 --json > " + json + " 2>/dev/null";
  EXPECT_EQ(test::run_command(cmd), 0) << cmd;
  return parse_file(json);
}

struct Usage {
  double total, scratch, peak;
};

Usage usage(const nlohmann::json& s, const std::string& what) {
  const Usage u{s["footprint"]["total_bytes"], s["footprint"]["backend_scratch_bytes"],
                s["peak_device_bytes"]};
  std::printf("%s: footprint %.2f MiB (backend scratch %.2f MiB), peak device %.2f MiB\n",
              what.c_str(), u.total / (1 << 20), u.scratch / (1 << 20), u.peak / (1 << 20));
  EXPECT_GT(u.scratch, 0) << what;
  EXPECT_LE(u.peak, u.total + kAllocationTails)
      << what << ": peak " << u.peak << " over the announced " << u.total;
  return u;
}

// Both runs stay within the footprint; the scratch is a bound over the plan's shapes, which
// perplexity's full micro-batches reach all but a little of.
void expect_within_footprint(const std::string& model, const std::string& extra,
                             const std::string& what) {
  const nlohmann::json gen = generate(model, extra);
  ASSERT_GE(gen["prompt_tokens"].get<int64_t>(), kBatch)
      << what << ": the prompt must fill a batch";
  usage(gen, what + ", generation");
  const Usage ppl = usage(perplexity(model, extra), what + ", perplexity");
  EXPECT_GE(ppl.peak, ppl.total - 0.05 * ppl.scratch - kAllocationTails)
      << what << ": perplexity's peak " << ppl.peak << " well under the announced " << ppl.total
      << " (scratch " << ppl.scratch << ")";
}

// A server's decode step of kDecodeStepRows sequences, run eagerly, recorded, then replayed: its
// attention partials, int8 activations (the dense weights' and the experts' by id) and its
// recordings are within the footprint too. The sequences' caches share the context the footprint
// counts for one. In this process, as the only engine of the binary (the device's peak is the
// process's).
TEST(VramGate, BatchedDecodeSteps) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::string model = test::scratch_path("vram-batched-qwen3.gguf");
  ASSERT_EQ(test::run_command(test::binary_path() +
                              " synth --shape qwen3-30b-a3b --layers 2 --dtype q4_k_m -o " + model +
                              " > /dev/null 2>&1"),
            0);
  EngineOptions o;
  o.backend = "cuda";
  o.ctx = 256;
  o.prefill_batch = kBatch;
  auto engine = Engine::open(model, o);
  const auto V = static_cast<size_t>(engine->cfg().n_vocab);
  Forward forward(*engine, kBatch);
  std::vector<std::unique_ptr<KvCache>> kv;
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < kDecodeStepRows; ++s) {
    kv.push_back(std::make_unique<KvCache>(*engine, o.ctx / kDecodeStepRows));
    tokens.push_back(static_cast<int32_t>(s + 1));
  }
  std::vector<float> logits(kv.size() * V);
  for (int step = 0; step < 4; ++step) {
    std::vector<SeqChunk> chunks;
    for (size_t s = 0; s < kv.size(); ++s)
      chunks.push_back({kv[s].get(), &tokens[s], 1, logits.data() + s * V, false});
    forward.run(chunks);
  }
  const auto total = static_cast<double>(engine->footprint().total);
  const auto peak = static_cast<double>(engine->backend().device_peak_bytes());
  std::printf("batched decode: footprint %.2f MiB, peak device %.2f MiB\n", total / (1 << 20),
              peak / (1 << 20));
  EXPECT_LE(peak, total + kAllocationTails) << "batched decode's peak over the footprint";
  std::remove(model.c_str());
}

TEST(VramGate, BundledModelResidentAndStreamed) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  expect_within_footprint("", "", "bundled, resident");
  expect_within_footprint("", "--expert-slots 2", "bundled, 2 slots");
}

TEST(VramGate, QuantisedShapesOfRealModels) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    std::string shape, dtype, extra;
  };
  for (const Case& c : {Case{"llama3.2-1b", "q4_k_m", ""}, Case{"llama3.2-1b", "q8_0", ""},
                        Case{"qwen3-30b-a3b", "q4_k_m", ""},
                        Case{"qwen3-30b-a3b", "q4_k_m", "--expert-slots 16"}}) {
    const std::string model = test::scratch_path("vram-" + c.shape + "-" + c.dtype + ".gguf");
    if (!test::file_exists(model)) {
      ASSERT_EQ(test::run_command(test::binary_path() + " synth --shape " + c.shape +
                                  " --layers 2 --dtype " + c.dtype + " -o " + model +
                                  " > /dev/null 2>&1"),
                0);
    }
    expect_within_footprint(model, c.extra, c.shape + " " + c.dtype + " " + c.extra);
  }
  for (const char* m : {"llama3.2-1b-q4_k_m", "llama3.2-1b-q8_0", "qwen3-30b-a3b-q4_k_m"})
    std::remove(test::scratch_path(std::string("vram-") + m + ".gguf").c_str());
}

}  // namespace
}  // namespace ts

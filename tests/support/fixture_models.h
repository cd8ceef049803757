// The random-init family fixtures: where each form (HF dir, GGUF of each dtype) of a fixture is,
// its prompt and reference logits, and the comparison the fixtures README prescribes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "moe/cache_policy.h"
#include "moe/uring_reader.h"
#include "quant/dtype.h"

namespace ts {
class Engine;
}

namespace ts::test {

// The bundled model (models/tiny-moe-q8_0.gguf) on the CPU, 2 threads, ctx rows of KV cache.
std::unique_ptr<Engine> open_bundled_model(int64_t ctx);

struct FixtureForm {
  std::string fixture;  // e.g. "qwen3"
  std::string form;     // "hf", "f32", "f16", "mxfp4"
  std::string path;     // model path to open
  std::string dir;      // folder holding ref_logits.f32 and the prompt
};

// Every form available: the repository's copies always, the shared ones when present.
std::vector<FixtureForm> fixture_forms(const std::vector<std::string>& fixtures);

std::vector<int32_t> fixture_prompt(const FixtureForm& f);
// The reference logits: ref_logits.f32, or ref_logits_<type>.f32 for a fixture named
// <model>_<type> (gpt_oss_mxfp4: HF's logits with the experts dequantised exactly).
std::string fixture_ref_logits(const FixtureForm& f);
// A fixture's file from the shared data when it is there, else the repo's copy under
// tests/fixtures/models, else "": most fixtures live in the shared data only (the caller skips,
// TS_REQUIRE_SHARED).
std::string fixture_file(const std::string& fixture, const std::string& file);
std::vector<float> read_f32_file(const std::string& path);
std::vector<uint8_t> read_bytes_file(const std::string& path);
// "1,2,3": ids as the CLI's --tokens takes them.
std::string ids_csv(const std::vector<int32_t>& ids);

struct LogitsComparison {
  double rel = 0;            // max |x - ref| / max |ref|
  int64_t rows_checked = 0;  // rows whose top-1/top-2 gap makes argmax meaningful
  int64_t argmax_mismatches = 0;
  std::string summary() const;
};

LogitsComparison compare_logits(const std::vector<float>& x, const std::vector<float>& ref,
                                int64_t vocab);
// The cosine of the angle between two vectors of one size (embeddings against a reference).
double cosine(const std::vector<float>& a, const std::vector<float>& b);
// max |got - want| / max |want| (the sizes must agree: a test failure otherwise).
double max_rel_error(const std::vector<float>& got, const std::vector<float>& want);
// Mean over rows of KL(softmax(ref) || softmax(x)).
// Every element within atol + rtol * |want| (the first few misses reported, named `what`).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float atol,
                  float rtol, const std::string& what);
// Opening the model at `path` fails with a Model error whose message contains `what`.
void expect_refused(const std::string& path, const std::string& what);
// The message of the ts::Error `f` throws, or "no error".
template <class F>
std::string error_text(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

double mean_kl(const std::vector<float>& x, const std::vector<float>& ref, int64_t vocab);

// How to run a model over a prompt for its logits.
struct LogitsRun {
  std::string backend = "cpu";
  int64_t batch = 64;   // prefill micro-batch
  bool decode = false;  // one token at a time instead of chunked prefill
  int64_t slots = 0;    // expert slots (0: resident)
  CachePolicyKind policy = CachePolicyKind::Lru;
  bool prefetch = false;
  ExpertIo io = ExpertIo::Direct;  // how streamed experts are read (CPU)
  uint64_t ram_budget = 0;         // pinned host RAM tier for streamed experts (device backends)
  DType kv = DType::F32;
  int64_t ctx = 64;
  int threads = 2;
};
// `turbospark logits -m DIR/hf <extra> --image DIR/image0.png --image DIR/image1.png --tokens
// <meta.json's image prompt> --kv-type f32` in a vision fixture's folder, compared with its
// ref_logits_image.f32 (a failed run is a test failure, its output shown). `model` in place of
// DIR/hf where given.
LogitsComparison cli_image_logits(const std::string& dir, const std::string& extra, int64_t vocab,
                                  const std::string& model = "");
// llama.cpp's perplexity method on the repository's copy of valid.txt, -c 256 (tiny-moe figures).
double llama_cpp_method_ppl(const std::string& path, int64_t expert_slots);
// Logits [ids.size()][vocab] of every position.
std::vector<float> run_logits(const std::string& path, const std::vector<int32_t>& ids,
                              const LogitsRun& r);

}  // namespace ts::test

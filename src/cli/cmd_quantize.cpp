// `turbospark quantize IN.gguf OUT.gguf TYPE [--imatrix FILE] [-t N]`: a GGUF of f32 / f16 / bf16
// weights (one file or any part of a split model, or an HF directory converted in memory)
// rewritten in TYPE (a llama.cpp mix such as q4_k_m), each tensor typed and quantised as
// llama.cpp's llama-quantize does it (model/quantize_model.h), weighted by llama.cpp's importance
// matrix where one is given.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/hf_convert.h"
#include "cli/number_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "model/imatrix.h"
#include "model/quantize_model.h"

namespace ts::cli {
namespace {

struct QuantizeArgs {
  std::string in;
  std::string out;
  std::string type;
  std::string imatrix;
  int threads = 0;
};

int run_quantize(const QuantizeArgs& a) {
  std::string lower;
  for (char c : a.type)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const auto& types = quantize_types();
  const auto type = std::find_if(types.begin(), types.end(),
                                 [&](const QuantizeType& t) { return t.name == lower; });
  if (type == types.end())
    fail(ErrorKind::Usage,
         "quantize: type '" + a.type + "' is not one of " + quantize_type_names());
  if (a.in == a.out) fail(ErrorKind::Usage, "quantize: the output would overwrite the input");
  // An HF directory is converted in memory first, as `convert` would write it.
  const auto src =
      std::filesystem::is_directory(a.in) ? open_converted(a.in) : GgufFile::open(a.in);
  std::optional<Imatrix> imatrix;
  if (!a.imatrix.empty()) imatrix = Imatrix::load(a.imatrix);
  const int threads = a.threads > 0
                          ? a.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Progress bar("quantize", true);
  const auto t0 = std::chrono::steady_clock::now();
  const QuantizeSummary s = write_quantized(*src, *type, imatrix ? &*imatrix : nullptr, a.out,
                                            threads, [&](uint64_t done, uint64_t total) {
                                              bar.update(static_cast<int64_t>(done >> 20),
                                                         static_cast<int64_t>(total >> 20), "MiB");
                                            });
  bar.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "quantize: wrote %s (%s%s, %lld tensors, %lld quantised, %.3f GB) in %.1f s\n",
               a.out.c_str(), type->name.c_str(), imatrix ? " with imatrix" : "",
               static_cast<long long>(s.tensors), static_cast<long long>(s.quantized),
               static_cast<double>(s.bytes) / 1e9, secs);
  return 0;
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "quantize", "Rewrite a GGUF of f32 / f16 / bf16 weights in another type, as llama-quantize");
  auto a = std::make_shared<QuantizeArgs>();
  sub->add_option("input", a->in,
                  "Source GGUF (f32, f16 or bf16 weights; any part of a split) or HF directory")
      ->required();
  sub->add_option("output", a->out, "Output GGUF file")->required();
  sub->add_option("type", a->type, "Type: " + quantize_type_names())->required();
  sub->add_option("--imatrix", a->imatrix,
                  "llama.cpp importance matrix (GGUF from llama-imatrix) weighting the k-quant, "
                  "iq4 and q4/q5 quantisers (q2_k_s requires one)");
  sub->add_option("-t,--threads", a->threads, "Threads quantising rows (default: all cores)")
      ->check(at_least(0));
  return [a] { return run_quantize(*a); };
}

}  // namespace ts::cli

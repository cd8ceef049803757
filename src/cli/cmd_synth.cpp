// `turbospark synth --shape NAME --dtype T -o FILE.gguf [--layers N] [--seed S] [-t N]`: writes a
// GGUF of a real model's shape with seeded random weights, for benchmarking shapes that cannot be
// downloaded here (see model/synth_model.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/number_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "model/synth_model.h"
#include "model/synth_shapes.h"
#include "quant/quantize.h"

namespace ts::cli {
namespace {

struct SynthArgs {
  std::string shape;
  std::string dtype = "q8_0";
  std::string out;
  int64_t layers = 0;
  uint64_t seed = 0;
  int threads = 0;
  bool list = false;
};

std::string weight_dtype_names() {
  std::string s;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = dtype_info(id);
    if (info && can_quantize_weights(static_cast<DType>(id)))
      s += (s.empty() ? "" : ", ") + std::string(info->name);
  }
  return s + ", q4_k_m, q5_k_m (q4_k or q5_k and q6_k, as llama.cpp's Q4_K_M, Q5_K_M); mxfp4 is " +
         "llama.cpp's MXFP4_MOE (routed experts mxfp4, other matrices q8_0)";
}

int list_shapes() {
  std::printf("%-18s %-9s %7s %7s %6s %6s %5s %6s %7s %11s %9s\n", "shape", "arch", "vocab",
              "hidden", "layers", "heads", "kv", "h_dim", "ffn", "experts", "theta");
  for (const SynthShape& s : synth_shapes()) {
    const std::string experts = s.experts ? std::to_string(s.experts_used) + "/" +
                                                std::to_string(s.experts) + "x" +
                                                std::to_string(s.expert_ffn)
                                          : "-";
    std::printf("%-18s %-9s %7lld %7lld %6lld %6lld %5lld %6lld %7lld %11s %9.0f\n", s.name, s.arch,
                static_cast<long long>(s.vocab), static_cast<long long>(s.hidden),
                static_cast<long long>(s.layers), static_cast<long long>(s.heads),
                static_cast<long long>(s.kv_heads), static_cast<long long>(s.head_dim),
                static_cast<long long>(s.ffn), experts.c_str(), s.rope_theta);
  }
  std::printf("dtypes: %s\n", weight_dtype_names().c_str());
  return 0;
}

int run_synth(const SynthArgs& a) {
  if (a.list) return list_shapes();
  if (a.shape.empty())
    fail(ErrorKind::Usage, "--shape is required (known: " + synth_shape_names() + ")");
  if (a.out.empty()) fail(ErrorKind::Usage, "-o FILE.gguf is required");
  SynthOptions o;
  o.shape = a.shape;
  // A K_M mix is named by its base type and "_m": q4_k_m, q5_k_m.
  o.k_m_mix = a.dtype == "q4_k_m" || a.dtype == "q5_k_m";
  const auto dtype = dtype_from_name(o.k_m_mix ? a.dtype.substr(0, 4) : a.dtype);
  if (!dtype || !can_quantize_weights(*dtype))
    fail(ErrorKind::Usage, "--dtype: '" + a.dtype + "' is not one of " + weight_dtype_names());
  o.dtype = *dtype;
  o.layers = a.layers;
  o.seed = a.seed;
  o.threads = a.threads;
  const SynthSummary plan = plan_synth_model(o);
  std::fprintf(stderr, "synth: %s %s, %lld layers, %.3f B parameters, %.2f GB -> %s\n",
               a.shape.c_str(), a.dtype.c_str(), static_cast<long long>(plan.layers),
               plan.params / 1e9, plan.file_bytes / 1e9, a.out.c_str());
  Progress bar("synth", true);
  const auto t0 = std::chrono::steady_clock::now();
  const SynthSummary s = write_synth_model(o, a.out, [&](uint64_t done, uint64_t total) {
    bar.update(static_cast<int64_t>(done >> 20), static_cast<int64_t>(total >> 20), "MiB");
  });
  bar.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "synth: wrote %s (%lld tensors, %.2f GB) in %.1f s\n", a.out.c_str(),
               static_cast<long long>(s.tensors), s.file_bytes / 1e9, secs);
  return 0;
}

}  // namespace

Runner add_synth(CLI::App& app) {
  auto* sub = app.add_subcommand("synth",
                                 "Write a GGUF of a real model's shape with seeded random weights");
  auto a = std::make_shared<SynthArgs>();
  sub->add_option("--shape", a->shape, "Model shape (see --list)");
  sub->add_option("--dtype", a->dtype, "Type of every weight matrix (default q8_0)");
  sub->add_option("-o,--output", a->out, "Output GGUF file");
  sub->add_option("--layers", a->layers, "Keep only the first N layers (default: all)")
      ->check(at_least(1));
  sub->add_option("--seed", a->seed, "Random seed (default 0)");
  sub->add_option("-t,--threads", a->threads,
                  "Threads generating weights (default: physical cores)")
      ->check(at_least(0));
  sub->add_flag("--list", a->list, "List the shapes and dtypes, then exit");
  return [a] { return run_synth(*a); };
}

}  // namespace ts::cli

#include "cli/bench_encoder.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "cli/sample_stats.h"
#include "core/thread_pool.h"
#include "runtime/bandwidth.h"
#include "runtime/encoder.h"

namespace ts::cli {
namespace {

// Arithmetic (2 per multiply-add) of one pass over `texts` texts of `tokens` tokens.
double pass_flops(const ArchConfig& c, int64_t tokens, int64_t texts) {
  const auto d = static_cast<double>(c.n_embd), ff = static_cast<double>(c.n_ff);
  const double ffn_matrices = c.encoder.ffn == EncoderFfn::SwiGlu ? 3 : 2;
  const auto rows = static_cast<double>(tokens * texts);
  const double projections = 2 * rows * (4 * d * d + ffn_matrices * d * ff);
  // Every query row against every key of its text, q.k then p.v: head_dim x heads = d each.
  const double attention = 2 * 2 * static_cast<double>(texts) * static_cast<double>(tokens) *
                           static_cast<double>(tokens) * d;
  return static_cast<double>(c.n_layer) * (projections + attention);
}

}  // namespace

int bench_encoder(const EncoderBenchArgs& a) {
  const int threads = a.threads > 0 ? a.threads : physical_cores();
  ComputePeak peak;
  if (a.roofline) peak = measure_compute_peak(threads);
  const auto encoder = Encoder::open(a.path, a.backend, threads);
  const ArchConfig& c = encoder->cfg();
  std::mt19937_64 rng(1234);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(c.n_vocab - 1));
  std::vector<std::vector<int32_t>> texts(static_cast<size_t>(a.texts));
  for (std::vector<int32_t>& t : texts) {
    t.resize(static_cast<size_t>(a.tokens));
    for (int32_t& x : t) x = id(rng);
    encoder->check(t);  // a text longer than the positions is refused before anything runs
  }
  std::vector<double> samples;  // tokens/s
  for (int rep = -1; rep < a.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> rows = encoder->hidden(texts);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep >= 0) samples.push_back(static_cast<double>(a.tokens * a.texts) / s);
  }
  if (a.roofline) reprobe_compute_peak(peak);
  const std::string test = "emb " + std::to_string(a.tokens) + " x " + std::to_string(a.texts);
  const DType t = encoder->matrix_type();
  const bool float_kernels = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  // The tokens a second the peak of the weights' kernels would encode.
  const double bound = (float_kernels ? peak.f32_flops : peak.int8_ops) /
                       (pass_flops(c, a.tokens, a.texts) / static_cast<double>(a.tokens * a.texts));
  const std::string model = std::filesystem::path(a.path).filename().string();
  if (a.json) {
    nlohmann::json j = {{"model", model},
                        {"family", family_name(c.family)},
                        {"weight_bytes", encoder->weight_bytes()},
                        {"type", dtype_name(t)},
                        {"threads", threads},
                        {"reps", a.reps},
                        {"tests",
                         {{{"test", test},
                           {"tokens", a.tokens},
                           {"texts", a.texts},
                           {"avg_ts", sample_mean(samples)},
                           {"stddev_ts", sample_stddev(samples)},
                           {"samples_ts", samples}}}}};
    if (a.roofline) {
      j["machine"] = {{"f32_peak_gflops", peak.f32_flops / 1e9},
                      {"f32_isa", peak.f32_isa},
                      {"int8_peak_gops", peak.int8_ops / 1e9},
                      {"int8_isa", peak.int8_isa}};
      j["tests"][0]["roofline"] = {{"bound_ts", bound},
                                   {"fraction", sample_mean(samples) / bound},
                                   {"peak", float_kernels ? "f32" : "int8"}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("| model | family | type | weights | threads | test | t/s |%s\n",
              a.roofline ? " bound t/s | % of bound |" : "");
  std::printf("| --- | --- | --- | ---: | ---: | --- | ---: |%s\n",
              a.roofline ? " ---: | ---: |" : "");
  std::printf("| %s | %s | %s | %.1f MiB | %d | %s | %.2f ± %.2f |", model.c_str(),
              family_name(c.family), dtype_name(t),
              static_cast<double>(encoder->weight_bytes()) / (1 << 20), threads, test.c_str(),
              sample_mean(samples), sample_stddev(samples));
  if (a.roofline) std::printf(" %.1f | %.1f |", bound, 100 * sample_mean(samples) / bound);
  std::printf("\n");
  return 0;
}

}  // namespace ts::cli

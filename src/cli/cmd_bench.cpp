// `turbospark bench [-m MODEL] [-p 512] [-n 128] [-r 5] [--json] [--roofline]`: llama-bench's two
// tests. pp: a prompt of p random tokens through chunked prefill; tg: n tokens decoded one at a
// time after a short prompt. Each runs once untimed (weights paged in, caches warm), then r timed
// repetitions: tokens/s as mean ± sample stddev. --depth D (llama-bench's -d) runs both tests after
// D tokens of context, prefilled once and returned to before each repetition, so a long-context
// decode costs one long prefill, not one per repetition. MoE models add the expert cache's hit
// rate, bytes read per token and achieved read bandwidth; --roofline states each figure as a
// fraction of the machine's bound (runtime/roofline.h over runtime/bandwidth.h). --image FILE adds
// the vision tower's encode time of each image (cli/bench_image.h).
// An encoder model runs its own test instead (cli/bench_encoder.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/bench_encoder.h"
#include "cli/bench_image.h"
#include "cli/bench_streaming.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/number_checks.h"
#include "cli/sample_stats.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/family.h"
#include "model/model_spec.h"
#include "moe/uring_reader.h"
#include "runtime/bandwidth.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/roofline.h"
#include "runtime/session.h"

namespace ts::cli {
namespace {

// Bytes of one routed expert, averaged over every layer's experts.
double mean_expert_bytes(const ModelSpec& spec) {
  uint64_t experts = 0;
  for (const LayerIndex& L : spec.layers) experts += L.experts.size();
  return experts == 0
             ? 0.0
             : static_cast<double>(spec.routed_expert_bytes) / static_cast<double>(experts);
}

struct BenchArgs {
  ModelFlags model;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int reps = 5;
  int64_t tg_prompt = 16;
  int64_t depth = 0;     // context prefilled once before the tests (0: none)
  int64_t parallel = 1;  // sequences decoding together in the tg test
  bool json = false;
  bool roofline = false;
  ImageFlags images;
};

struct Machine {
  ReadBandwidth bw;
  ComputePeak peak;
  DeviceCeilings device;  // zero on the CPU backend; else the bounds of a device run
  bool on_device() const { return device.copy_bytes_per_s > 0; }
};

struct TestResult {
  std::string name;  // pp512, tg128, tg32 @ d8192
  int64_t n_prompt = 0, n_gen = 0;
  std::vector<double> samples;  // tokens/s per repetition
  ExpertStats experts;          // summed over the timed repetitions
  int64_t tokens = 0;           // timed tokens over all repetitions
  double mean() const { return sample_mean(samples); }
  double stddev() const { return sample_stddev(samples); }
};

double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

// A test's name as llama-bench writes it: "tg32", or "tg32 @ d8192" after a depth.
std::string test_name(const std::string& base, const BenchArgs& a) {
  return a.depth > 0 ? base + " @ d" + std::to_string(a.depth) : base;
}

// The depth context: a.depth random tokens fed once, untimed (its rate is reported beside the
// tests), kept as the session's checkpoint so truncate(a.depth) returns to it.
struct Depth {
  int64_t tokens = 0;
  double seconds = 0;
};

Depth prefill_depth(Engine& engine, Session& session, const BenchArgs& a, std::mt19937_64& rng) {
  Depth d;
  if (a.depth == 0) return d;
  std::vector<float> logits(static_cast<size_t>(engine.cfg().n_vocab));
  const std::vector<int32_t> ids = random_tokens(rng, a.depth, engine.cfg().n_vocab);
  const auto t0 = std::chrono::steady_clock::now();
  session.feed(ids.data(), a.depth, logits.data(), false);
  d.seconds = elapsed(t0);
  d.tokens = a.depth;
  session.checkpoint();
  return d;
}

// One untimed run with n = warm (weights paged in, caches warm), then a.reps timed runs with
// n = full into r: each prepare(n) before the clock starts, then run(n) timed, which returns the
// tokens it fed.
template <class Prepare, class Run>
void timed_runs(Engine& engine, const BenchArgs& a, int64_t warm, int64_t full,
                const Prepare& prepare, const Run& run, TestResult& r) {
  for (int rep = -1; rep < a.reps; ++rep) {
    const int64_t n = rep < 0 ? warm : full;
    prepare(n);
    engine.experts().reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t tokens = run(n);
    const double s = elapsed(t0);
    if (rep < 0) continue;
    r.samples.push_back(static_cast<double>(tokens) / s);
    r.experts.add(engine.experts().total_stats());
    r.tokens += tokens;
  }
}

TestResult run_pp(Engine& engine, Session& session, const BenchArgs& a, std::mt19937_64& rng) {
  TestResult r;
  r.name = test_name("pp" + std::to_string(a.n_prompt), a);
  r.n_prompt = a.n_prompt;
  const int64_t V = engine.cfg().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<int32_t> ids;
  // The untimed first run is one micro-batch: enough to page in every weight.
  timed_runs(
      engine, a, std::min(a.n_prompt, engine.options().prefill_batch), a.n_prompt,
      [&](int64_t n) {
        ids = random_tokens(rng, n, V);
        session.truncate(a.depth);
      },
      [&](int64_t n) {
        session.feed(ids.data(), n, logits.data(), false);
        return n;
      },
      r);
  return r;
}

TestResult run_tg(Engine& engine, Session& session, const BenchArgs& a, std::mt19937_64& rng) {
  TestResult r;
  r.name = test_name("tg" + std::to_string(a.n_gen), a);
  r.n_prompt = a.depth > 0 ? a.depth : a.tg_prompt;
  r.n_gen = a.n_gen;
  const int64_t V = engine.cfg().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<int32_t> ids;
  timed_runs(
      engine, a, std::min<int64_t>(a.n_gen, 2), a.n_gen,
      [&](int64_t n) {
        ids = random_tokens(rng, n, V);
        session.truncate(a.depth);
        if (a.depth > 0) return;
        const std::vector<int32_t> prompt = random_tokens(rng, a.tg_prompt, V);
        session.feed(prompt.data(), a.tg_prompt, logits.data(), false);
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          session.feed(&ids[static_cast<size_t>(i)], 1, logits.data(), false);
        return n;
      },
      r);
  return r;
}

// tg with `a.parallel` sequences decoding together, as the server's batched decode does: each has
// its own prompt and KV cache, and every step feeds one token of each through one forward pass,
// each wanting its logits. Tokens/s counts every sequence's tokens.
TestResult run_tg_parallel(Engine& engine, const BenchArgs& a, std::mt19937_64& rng) {
  const int64_t N = a.parallel, V = engine.cfg().n_vocab;
  TestResult r;
  r.name = "tg" + std::to_string(a.n_gen) + "x" + std::to_string(N);
  r.n_prompt = a.tg_prompt;
  r.n_gen = a.n_gen;
  Forward forward(engine, N);
  std::vector<std::unique_ptr<KvCache>> kv;
  for (int64_t s = 0; s < N; ++s)
    kv.push_back(std::make_unique<KvCache>(engine, engine.options().ctx));
  std::vector<float> logits(static_cast<size_t>(N * V));
  std::vector<SeqChunk> step(static_cast<size_t>(N));
  std::vector<int32_t> ids;
  timed_runs(
      engine, a, std::min<int64_t>(a.n_gen, 2), a.n_gen,
      [&](int64_t n) {
        // The prompts, one sequence at a time in pieces of the forward's N rows.
        for (int64_t s = 0; s < N; ++s) {
          KvCache* cache = kv[static_cast<size_t>(s)].get();
          cache->rewind(0);
          const std::vector<int32_t> prompt = random_tokens(rng, a.tg_prompt, V);
          for (int64_t start = 0; start < a.tg_prompt; start += N)
            forward.run({SeqChunk{cache, prompt.data() + start, std::min(N, a.tg_prompt - start)}});
        }
        ids = random_tokens(rng, n * N, V);
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t s = 0; s < N; ++s)
            step[static_cast<size_t>(s)] =
                SeqChunk{kv[static_cast<size_t>(s)].get(), &ids[static_cast<size_t>(i * N + s)], 1,
                         logits.data() + s * V, false};
          forward.run(step);
        }
        return n * N;
      },
      r);
  return r;
}

uint64_t model_params(const ModelSpec& s) {
  auto elements = [](const TensorRef& t) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    return n;
  };
  uint64_t n = elements(s.token_embd) + elements(s.output_norm);
  if (!s.cfg.tied_embeddings) n += elements(s.output);
  for (const LayerIndex& L : s.layers) {
    for (const auto& t : L.tensors)
      if (t) n += elements(*t);
    for (const auto& e : L.experts)
      for (const ExpertSlice& x : e) n += static_cast<uint64_t>(x.rows * x.cols);
  }
  return n;
}

// The type of the layers' matrices (what llama-bench's model column calls the quantisation).
DType matrix_dtype(const ModelSpec& s) {
  const TensorRef* wq = s.layers.empty() ? nullptr : s.layers[0].get(LayerTensor::Wq);
  return wq != nullptr ? wq->dtype : s.token_embd.dtype;
}

bool integer_kernels(DType t) {
  return t != DType::F32 && t != DType::F16 && t != DType::BF16;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

std::string human_bytes(double b) {
  char s[32];
  if (b >= 1e9)
    std::snprintf(s, sizeof s, "%.2f GB", b / 1e9);
  else
    std::snprintf(s, sizeof s, "%.1f MB", b / 1e6);
  return s;
}

struct Report {
  Engine& engine;
  const BenchArgs& a;
  int threads;
  const Machine* machine;  // null without --roofline
  std::vector<TestResult> tests;
  double disk_bps = 0;  // the model file's O_DIRECT read rate (streaming on the host), else 0
  std::vector<ImageEncodeResult> images;
  Depth depth;

  // A file of a MoE family cut to its dense layers (synth --layers) has no experts to report.
  bool moe() const { return engine.cfg().is_moe() && engine.spec().routed_expert_bytes > 0; }
  bool streaming() const { return moe() && engine.experts().streaming(); }
  std::string slots() const {
    return moe() && engine.options().expert_slots > 0
               ? std::to_string(engine.options().expert_slots)
               : "all";
  }

  nlohmann::json moe_json(const TestResult& t) const {
    const ExpertStats& e = t.experts;
    const double lookups = static_cast<double>(e.hits + e.misses);
    const double per_tok = static_cast<double>(e.bytes_read) / static_cast<double>(t.tokens);
    const double gbps =
        e.read_seconds > 0 ? static_cast<double>(e.bytes_read) / e.read_seconds / 1e9 : 0;
    return {{"hits", e.hits},
            {"misses", e.misses},
            {"ram_hits", e.ram_hits},  // misses the pinned RAM tier served (no file read)
            {"prefetched", e.prefetched},
            {"prefetch_hits", e.prefetch_hits},
            {"hit_rate", lookups > 0 ? static_cast<double>(e.hits) / lookups : 1.0},
            {"bytes_read_per_token", per_tok},
            {"read_seconds", e.read_seconds},
            {"read_gbps", gbps},
            // The token rate the expert reads alone allow at the achieved read bandwidth.
            {"io_bound_ts", per_tok > 0 && gbps > 0 ? nlohmann::json(gbps * 1e9 / per_tok)
                                                    : nlohmann::json(nullptr)},
            {"read_rate", read_rate_json(disk_bps, t.mean(), per_tok)}};
  }

  // Seconds of host arithmetic: the matrices at the peak of their kernels' type, the attention
  // (f32 whatever the weights' type) at the f32 peak.
  double host_compute_seconds(const FeedFlops& f) const {
    const bool int8 = integer_kernels(matrix_dtype(engine.spec()));
    return f.matrix / (int8 ? machine->peak.int8_ops : machine->peak.f32_flops) +
           f.attention / machine->peak.f32_flops;
  }

  nlohmann::json roofline_json(const TestResult& t) const {
    const ModelSpec& spec = engine.spec();
    if (t.n_gen > 0) {
      const double attended =
          static_cast<double>(t.n_prompt) + static_cast<double>(t.n_gen + 1) / 2;
      const DecodeBytes b = decode_bytes(spec, engine.options().kv_type, attended);
      const double bw =
          machine->on_device() ? machine->device.copy_bytes_per_s : machine->bw.bytes_per_s;
      // Streamed experts on a device also cross the host link: every miss copies one expert, as
      // does every prefetch, used or not (an expert of the model's average size: in K_M mixes
      // some layers' are larger). The bound is the slower of the two, which can overlap.
      const double copied = machine->on_device() && streaming()
                                ? static_cast<double>(t.experts.misses + t.experts.prefetched) *
                                      mean_expert_bytes(spec) / static_cast<double>(t.tokens)
                                : 0.0;
      // On the host a step's arithmetic can take longer than its reads: the attention of a long
      // context grows with it, most of all MLA's (a head's q.k and p.v over the whole latent row).
      FeedFlops f;
      for (int64_t i = 0; i < t.n_gen; ++i) {
        const FeedFlops step = feed_flops(spec, t.n_prompt + i, 1);
        f.matrix += step.matrix / static_cast<double>(t.n_gen);
        f.attention += step.attention / static_cast<double>(t.n_gen);
      }
      const double read_s = b.total() / bw;
      const double copy_s = copied > 0 ? copied / machine->device.h2d_bytes_per_s : 0.0;
      const double compute_s = machine->on_device() ? 0.0 : host_compute_seconds(f);
      const double seconds = std::max({read_s, copy_s, compute_s});
      const double bound = 1.0 / seconds;
      return {{"bytes_per_token", b.total()},
              {"weight_bytes", b.weights},
              {"expert_bytes", b.experts},
              {"kv_bytes", b.kv},
              {"expert_copy_bytes_per_token", copied},
              {"flops_per_token", f.total()},
              {"attention_flops_per_token", f.attention},
              {"bound_by", seconds == read_s   ? "memory"
                           : seconds == copy_s ? "host link"
                                               : "compute"},
              {"bound_ts", bound},
              {"fraction", t.mean() / bound}};
    }
    const bool int8 = integer_kernels(matrix_dtype(spec));
    const FeedFlops f = feed_flops(spec, a.depth, t.n_prompt);
    const double n = static_cast<double>(t.n_prompt);
    const double bound = machine->on_device() ? machine->device.gemm_flops / (f.total() / n)
                                              : n / host_compute_seconds(f);
    return {{"flops_per_token", f.total() / n},
            {"attention_flops_per_token", f.attention / n},
            {"peak", machine->on_device() ? "bf16 gemm"
                     : int8               ? "int8"
                                          : "f32"},
            {"peak_ops", machine->on_device() ? machine->device.gemm_flops
                         : int8               ? machine->peak.int8_ops
                                              : machine->peak.f32_flops},
            {"bound_ts", bound},
            {"fraction", t.mean() / bound}};
  }

  nlohmann::json json() const {
    const ModelSpec& spec = engine.spec();
    const ArchConfig& c = engine.cfg();
    nlohmann::json j;
    j["model"] = {{"path", spec.source->path()},
                  {"family", family_name(c.family)},
                  {"params", model_params(spec)},
                  {"size_bytes", spec.resident_bytes + spec.routed_expert_bytes},
                  {"dtype", dtype_name(matrix_dtype(spec))},
                  {"layers", c.n_layer},
                  {"experts", c.n_expert},
                  {"experts_used", c.n_expert_used}};
    j["config"] = {{"backend", engine.backend().name()},
                   {"threads", threads},
                   {"expert_slots", slots()},
                   {"kv_type", dtype_name(engine.options().kv_type)},
                   {"prefill_batch", engine.options().prefill_batch},
                   {"tg_prompt", a.depth > 0 ? 0 : a.tg_prompt},
                   {"depth", a.depth},
                   {"reps", a.reps},
                   {"loadavg_1m", load_average()}};
    if (machine != nullptr) {
      j["machine"] = {{"read_bandwidth_gbps", machine->bw.bytes_per_s / 1e9},
                      {"bandwidth_buffer_bytes", machine->bw.buffer_bytes},
                      {"bandwidth_threads", machine->bw.threads},
                      {"f32_peak_gflops", machine->peak.f32_flops / 1e9},
                      {"f32_isa", machine->peak.f32_isa},
                      {"int8_peak_gops", machine->peak.int8_ops / 1e9},
                      {"int8_peak_256bit_gops", machine->peak.int8_ops_256 / 1e9},
                      {"int8_isa", machine->peak.int8_isa}};
      if (machine->on_device())
        j["device"] = {{"copy_gbps", machine->device.copy_bytes_per_s / 1e9},
                       {"bf16_gemm_tflops", machine->device.gemm_flops / 1e12},
                       {"h2d_gbps", machine->device.h2d_bytes_per_s / 1e9}};
    }
    j["tests"] = nlohmann::json::array();
    for (const TestResult& t : tests) {
      nlohmann::json r = {{"test", t.name},          {"n_prompt", t.n_prompt},
                          {"n_gen", t.n_gen},        {"avg_ts", t.mean()},
                          {"stddev_ts", t.stddev()}, {"samples_ts", t.samples}};
      if (moe()) r["moe"] = moe_json(t);
      if (machine != nullptr) r["roofline"] = roofline_json(t);
      j["tests"].push_back(std::move(r));
    }
    if (streaming()) {
      j["experts"] = {{"io", expert_io_name(engine.experts().io())},
                      {"lookahead", lookahead_json(engine)}};
    }
    if (!images.empty()) j["images"] = image_encode_json(images);
    if (depth.tokens > 0)
      j["depth_prefill"] = {{"tokens", depth.tokens},
                            {"seconds", depth.seconds},
                            {"ts", static_cast<double>(depth.tokens) / depth.seconds}};
    return j;
  }

  void markdown() const {
    if (!tests.empty()) tests_markdown();
    if (!images.empty()) print_image_encode(images, threads);
  }

  void tests_markdown() const {
    const ModelSpec& spec = engine.spec();
    const std::string model = std::filesystem::path(spec.source->path()).filename().string();
    std::string head = "| model | size | params | type | backend | threads | slots | test | t/s |";
    std::string rule = "| --- | ---: | ---: | --- | --- | ---: | ---: | --- | ---: |";
    if (moe()) {
      head += " hit % | MB read/tok | read GB/s |";
      rule += " ---: | ---: | ---: |";
    }
    if (machine != nullptr) {
      head += " bound t/s | % of bound |";
      rule += " ---: | ---: |";
    }
    std::printf("%s\n%s\n", head.c_str(), rule.c_str());
    for (const TestResult& t : tests) {
      std::printf(
          "| %s | %s | %.2f B | %s | %s | %d | %s | %s | %.2f ± %.2f |", model.c_str(),
          human_bytes(static_cast<double>(spec.resident_bytes + spec.routed_expert_bytes)).c_str(),
          static_cast<double>(model_params(spec)) / 1e9, dtype_name(matrix_dtype(spec)),
          engine.backend().name().c_str(), threads, slots().c_str(), t.name.c_str(), t.mean(),
          t.stddev());
      if (moe()) {
        const nlohmann::json m = moe_json(t);
        std::printf(" %.1f | %.2f | %.2f |", 100 * m["hit_rate"].get<double>(),
                    m["bytes_read_per_token"].get<double>() / 1e6, m["read_gbps"].get<double>());
      }
      if (machine != nullptr) {
        const nlohmann::json r = roofline_json(t);
        std::printf(" %.2f | %.1f |", r["bound_ts"].get<double>(),
                    100 * r["fraction"].get<double>());
      }
      std::printf("\n");
    }
    for (const TestResult& t : tests) {
      if (machine == nullptr || t.n_gen == 0) continue;
      const nlohmann::json r = roofline_json(t);
      if (r["bound_by"] == "compute")
        std::printf(
            "\n%s is bound by arithmetic, not reads: %.2f GFLOP a token, %.2f of it "
            "attention\n",
            t.name.c_str(), r["flops_per_token"].get<double>() / 1e9,
            r["attention_flops_per_token"].get<double>() / 1e9);
    }
    if (depth.tokens > 0)
      std::printf(
          "\ndepth: %lld tokens prefilled once, untimed by the tests, in %.1f s (%.1f t/s)\n",
          static_cast<long long>(depth.tokens), depth.seconds,
          static_cast<double>(depth.tokens) / depth.seconds);
    if (moe())
      std::printf(
          "\nhit %% = expert lookups found in a slot; MB read/tok = expert bytes read from the "
          "file "
          "per token; read GB/s = those bytes / the time compute waited for them.\n");
    if (streaming() && !tests.empty()) {
      const TestResult& t = tests.back();
      print_streaming_notes(engine, disk_bps, t.name, t.mean(),
                            moe_json(t)["bytes_read_per_token"].get<double>());
    }
    if (machine != nullptr && machine->on_device()) {
      std::printf(
          "\nbounds: device copy %.0f GB/s (read + write), bf16 GEMM %.1f TFLOP/s (cuBLAS), pinned "
          "host-to-device %.1f GB/s. tg bound = bytes per token (weights + top-k experts + KV) / "
          "copy bandwidth, or for streamed experts the copied experts per token / host-to-device "
          "bandwidth when that is longer; pp bound = GEMM rate / FLOPs per token.\n",
          machine->device.copy_bytes_per_s / 1e9, machine->device.gemm_flops / 1e12,
          machine->device.h2d_bytes_per_s / 1e9);
    } else if (machine != nullptr) {
      std::printf(
          "\nbounds: memory read %.2f GB/s (%d threads, %llu MiB buffer); peak f32 %.1f GFLOP/s "
          "(%s), int8 %.1f GOP/s (%s; %.1f on 256-bit vectors; peaks: the higher of the probes "
          "before and after the tests). tg bound = the longer of bytes per token (weights + top-k "
          "experts + KV) / read bandwidth and its arithmetic; arithmetic: the matrices at the %s "
          "peak, the attention at the f32 peak; pp bound = its arithmetic.\n",
          machine->bw.bytes_per_s / 1e9, machine->bw.threads,
          static_cast<unsigned long long>(machine->bw.buffer_bytes >> 20),
          machine->peak.f32_flops / 1e9, machine->peak.f32_isa, machine->peak.int8_ops / 1e9,
          machine->peak.int8_isa, machine->peak.int8_ops_256 / 1e9,
          integer_kernels(matrix_dtype(spec)) ? "int8" : "f32");
    }
  }
};

int run_bench(BenchArgs& a) {
  const std::string path = model_path(a.model, true);
  if (is_encoder_model(path)) {
    // An encoder has one test, the embedding pass (cli/bench_encoder.h): -p tokens a text,
    // --parallel texts a pass; it generates nothing, so -n does not apply.
    if (a.depth > 0 || !a.images.images.empty())
      fail(ErrorKind::Usage, path + " is an encoder model: --depth and --image do not apply");
    if (a.n_prompt == 0) fail(ErrorKind::Usage, "nothing to run: an encoder's test needs -p > 0");
    const EngineOptions options = engine_options(a.model);
    return bench_encoder({path, options.backend, options.threads, a.n_prompt, a.parallel, a.reps,
                          a.json, a.roofline});
  }
  if (!a.images.mmproj.empty() && a.images.images.empty())
    fail(ErrorKind::Usage, "--mmproj without --image");
  if (a.n_prompt == 0 && a.n_gen == 0 && a.images.images.empty())
    fail(ErrorKind::Usage, "nothing to run: -p and -n are both 0 and no --image");
  if (a.parallel > 1 && a.roofline)
    fail(ErrorKind::Usage, "--roofline bounds one sequence's decode: leave out --parallel");
  if (a.parallel > 1 && a.depth > 0)
    fail(ErrorKind::Usage, "--depth runs one sequence: leave out --parallel");
  // The cache holds the longer of the two tests, nothing more (-c is ignored).
  a.model.ctx = a.depth > 0 ? a.depth + std::max(a.n_prompt, a.n_gen)
                            : std::max<int64_t>(a.n_prompt, a.tg_prompt + a.n_gen);
  const EngineOptions options = engine_options(a.model);
  const int threads = options.threads > 0 ? options.threads : physical_cores();
  std::unique_ptr<Machine> machine;
  if (a.roofline) {
    // Measured before the model is loaded, so the buffer does not compete with it for memory.
    machine = std::make_unique<Machine>();
    machine->bw = measure_read_bandwidth(threads);
    machine->peak = measure_compute_peak(threads);
  }
  auto engine = Engine::open(model_path(a.model, true), options);
  if (machine) machine->device = engine->backend().measure_ceilings();
  Session session(*engine);
  std::mt19937_64 rng(1234);
  Report report{*engine, a, threads, machine.get(), {}, measure_disk_rate(*engine), {}, {}};
  if (a.n_prompt > 0 || a.n_gen > 0) report.depth = prefill_depth(*engine, session, a, rng);
  if (a.n_prompt > 0) report.tests.push_back(run_pp(*engine, session, a, rng));
  if (a.n_gen > 0)
    report.tests.push_back(a.parallel > 1 ? run_tg_parallel(*engine, a, rng)
                                          : run_tg(*engine, session, a, rng));
  if (!a.images.images.empty())
    report.images =
        bench_image_encode(a.images, *engine, model_path(a.model, true), threads, a.reps);
  if (machine && !machine->on_device() && (a.n_prompt > 0 || a.n_gen > 0)) {
    // The compute peak again, after the tests (the bandwidth is probed once, before the model
    // takes the memory).
    reprobe_compute_peak(machine->peak);
  }
  if (a.json)
    std::printf("%s\n", report.json().dump(2).c_str());
  else
    report.markdown();
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "bench", "Measure prompt processing (pp) and generation (tg) speed, like llama-bench");
  auto a = std::make_shared<BenchArgs>();
  add_model_flags(sub, a->model, true);
  sub->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens of the pp test (0: skip it)")
      ->check(at_least(0));
  sub->add_option("-n,--n-gen", a->n_gen, "Tokens generated by the tg test (0: skip it)")
      ->check(at_least(0));
  sub->add_option("-r,--repetitions", a->reps, "Timed repetitions of each test")
      ->check(at_least(1));
  auto* tg_prompt =
      sub->add_option("--tg-prompt", a->tg_prompt,
                      "Prompt tokens fed (untimed) before each repetition of the tg test")
          ->check(at_least(1));
  sub->add_option("-d,--depth", a->depth,
                  "Context tokens prefilled once before both tests; each repetition returns to "
                  "it (llama-bench's -d)")
      ->check(at_least(0))
      ->excludes(tg_prompt);
  sub->add_option("--parallel", a->parallel,
                  "Sequences decoding together in the tg test (batched decode, as the server "
                  "runs concurrent requests); t/s counts all of them")
      ->check(CLI::Range(1, 256));
  add_image_flags(sub, a->images);
  sub->add_flag("--json", a->json, "Print one JSON object instead of a markdown table");
  sub->add_flag(
      "--roofline", a->roofline,
      "Measure memory bandwidth and compute peak, and give each figure as a fraction of its bound");
  return [a] { return run_bench(*a); };
}

}  // namespace ts::cli

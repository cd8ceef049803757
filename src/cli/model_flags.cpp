#include "cli/model_flags.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "cli/number_checks.h"
#include "core/error.h"
#include "model/family.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "parallel/parallel_request.h"

namespace ts::cli {

void add_model_flags(CLI::App* app, ModelFlags& f, bool default_model) {
  app->add_option("-m,--model", f.model,
                  default_model ? "GGUF file or Hugging Face directory (default: the bundled model)"
                                : "GGUF file or Hugging Face directory");
  app->add_option("-t,--threads", f.threads, "CPU threads (default: physical cores)")
      ->check(at_least(0));
  app->add_option("-c,--ctx-size", f.ctx, "Context length (KV cache rows)")
      ->check(at_least(1))
      ->each([&f](const std::string&) { f.ctx_given = true; });
  app->add_option("--kv-type", f.kv_type, "KV cache type: f32, f16, bf16, q8_0")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  app->add_option(
         "--prefill-batch", f.prefill_batch,
         "Tokens per prefill micro-batch (default: 128 on the CPU, 512 for MoE models there; "
         "2048 on CUDA)")
      ->check(CLI::Range(1, 4096));
  app->add_option("--expert-slots", f.expert_slots, "Expert slots per MoE layer (0 = all resident)")
      ->check(at_least(0));
  app->add_option("--memory-budget,--vram-budget", f.memory_budget,
                  "Memory budget (RAM on the CPU, VRAM on a GPU, e.g. 8G) from which the expert "
                  "slots are derived");
  app->add_option("--ram-budget", f.ram_budget,
                  "Pinned host RAM (e.g. 16G) caching streamed experts (device backends)");
  app->add_option("--cache-policy", f.cache_policy,
                  "Expert cache policy: lru, lfu, flru (frequency-weighted LRU)")
      ->check(CLI::IsMember({"lru", "lfu", "flru"}));
  app->add_flag(
      "--expert-prefetch", f.expert_prefetch,
      "Read the experts the next MoE layer's router predicts ahead of time (streaming; on a "
      "GPU, copies from the --ram-budget tier)");
  app->add_option("--expert-io", f.expert_io,
                  "How streamed experts are read on the CPU: direct (io_uring, O_DIRECT: no page "
                  "cache), buffered (io_uring through the page cache), pread, or auto (pread "
                  "when the page cache can hold every expert beside the slots, else direct)")
      ->check(CLI::IsMember({"auto", "direct", "buffered", "pread"}));
  app->add_option("--state-checkpoints", f.state_checkpoints,
                  "Recurrent-state checkpoints per sequence (hybrid models): positions a sequence "
                  "can return to without recomputing from the start")
      ->check(CLI::Range(int64_t{0}, int64_t{64}));
  app->add_option("--backend", f.backend, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app->add_option("--device", f.device, "CUDA device index")->check(at_least(0));
  app->add_option("--tensor-parallel", f.tensor_parallel,
                  "GPUs to split attention heads and dense FFNs over (NCCL; docs/PARALLEL.md)")
      ->check(at_least(1));
  app->add_option("--expert-parallel", f.expert_parallel,
                  "GPUs to split an MoE model's routed experts over (NCCL; docs/PARALLEL.md)")
      ->check(at_least(1));
  app->add_option("--dist-init", f.dist_init,
                  "HOST:PORT where the processes of a multi-node run meet (rank 0 listens)");
}

uint64_t parse_bytes(const std::string& s, const std::string& flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    fail(ErrorKind::Usage, flag + ": '" + s + "' is not a size (e.g. 512M, 8G)");
  }
  std::string unit = s.substr(used);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    fail(ErrorKind::Usage, flag + ": unknown unit '" + unit + "' (K, M, G)");
  if (!(v > 0) || v * mult > 1.8e19) fail(ErrorKind::Usage, flag + ": '" + s + "' is out of range");
  return static_cast<uint64_t>(v * mult);
}

std::string model_path(const ModelFlags& f, bool default_model) {
  if (!f.model.empty()) return f.model;
  if (!default_model) fail(ErrorKind::Usage, "no model given (-m FILE)");
  // Installed (cmake --install, the package): beside the binary's prefix; else the source tree's.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path() / TURBOSPARK_INSTALLED_MODEL;
    if (std::filesystem::is_regular_file(installed, ec)) return installed.lexically_normal();
  }
  return TURBOSPARK_BUNDLED_MODEL;
}

bool is_encoder_model(const std::string& path) {
  return read_arch_config(*ModelSource::open(path)).stack == LayerStack::Encoder;
}

EngineOptions engine_options(const ModelFlags& f) {
  check_parallel_flags({f.tensor_parallel, f.expert_parallel, f.dist_init}, f.backend);
  EngineOptions o;
  o.backend = f.backend;
  o.device = f.device;
  o.threads = f.threads;
  o.ctx = f.ctx;
  o.kv_type = *dtype_from_name(f.kv_type);
  o.prefill_batch = f.prefill_batch;
  o.expert_slots = f.expert_slots;
  if (!f.memory_budget.empty()) o.memory_budget = parse_bytes(f.memory_budget, "--memory-budget");
  if (!f.ram_budget.empty()) o.ram_budget = parse_bytes(f.ram_budget, "--ram-budget");
  o.cache_policy = cache_policy_from_name(f.cache_policy);
  o.expert_prefetch = f.expert_prefetch;
  o.expert_io = expert_io_from_name(f.expert_io);
  o.state_checkpoints = f.state_checkpoints;
  return o;
}

void warn_beyond_trained_context(const Engine& engine, const ModelFlags& f) {
  const int64_t trained = engine.spec().cfg.ctx_train;
  const int64_t ctx = engine.options().ctx;
  if (f.ctx_given && trained > 0 && ctx > trained)
    std::fprintf(stderr,
                 "turbospark: warning: -c %lld is above the %lld tokens %s was trained on; "
                 "text past them may come out garbled\n",
                 static_cast<long long>(ctx), static_cast<long long>(trained),
                 engine.spec().source->path().c_str());
}

}  // namespace ts::cli

#include "cli/run_stats.h"

#include "core/memory_stats.h"

namespace ts::cli {

void print_run_stats(Engine& engine, const GenerateResult& r, std::FILE* out) {
  const double n = static_cast<double>(r.tokens.size());
  std::fprintf(out, "prompt %lld tokens %.1f tok/s | generated %zu tokens %.1f tok/s | finish %s",
               static_cast<long long>(r.prompt_tokens),
               r.prompt_seconds > 0 ? static_cast<double>(r.prompt_tokens) / r.prompt_seconds : 0.0,
               r.tokens.size(), r.generate_seconds > 0 ? n / r.generate_seconds : 0.0,
               finish_reason_name(r.finish));
  if (r.drafted > 0)
    std::fprintf(out, " | lookup %lld of %lld guessed tokens taken, %lld passes",
                 static_cast<long long>(r.draft_matched), static_cast<long long>(r.drafted),
                 static_cast<long long>(r.passes));
  if (engine.cfg().is_moe()) {
    const ExpertStats s = engine.experts().total_stats();
    const double lookups = static_cast<double>(s.hits + s.misses);
    std::fprintf(out, " | experts %s, hit rate %.1f%%, read %.1f MiB",
                 engine.experts().streaming() ? "streaming" : "resident",
                 lookups > 0 ? 100.0 * static_cast<double>(s.hits) / lookups : 100.0,
                 static_cast<double>(s.bytes_read) / (1 << 20));
    if (engine.experts().ram_tier_entries() > 0)
      std::fprintf(out, ", RAM tier hits %llu", static_cast<unsigned long long>(s.ram_hits));
  }
  std::fprintf(out, " | peak RSS %.1f MiB", static_cast<double>(peak_rss_bytes()) / (1 << 20));
  if (const uint64_t device = engine.backend().device_peak_bytes(); device > 0)
    std::fprintf(out, " | peak device memory %.1f MiB", static_cast<double>(device) / (1 << 20));
  std::fprintf(out, "\n");
}

}  // namespace ts::cli

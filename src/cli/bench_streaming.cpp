#include "cli/bench_streaming.h"

#include <cstdio>

#include "model/model_spec.h"
#include "moe/uring_reader.h"

namespace ts::cli {
namespace {

// Enough to see past the drive's cache and ramp-up at 1 MiB pieces.
constexpr uint64_t kDiskProbeBytes = uint64_t{1} << 30;

nlohmann::json rate(uint64_t hits, uint64_t total) {
  return total > 0 ? nlohmann::json(static_cast<double>(hits) / static_cast<double>(total))
                   : nlohmann::json(nullptr);
}

}  // namespace

double measure_disk_rate(Engine& engine) {
  const ExpertStore& x = engine.experts();
  if (!x.streaming() || !engine.backend().is_host()) return 0;
  return UringReader::measure_direct_rate(engine.spec().source->path(), kDiskProbeBytes);
}

nlohmann::json read_rate_json(double disk_bps, double ts, double bytes_per_token) {
  const double stream = ts * bytes_per_token;
  return {{"stream_read_gbps", stream / 1e9},
          {"disk_direct_gbps", disk_bps / 1e9},
          {"fraction_of_disk",
           disk_bps > 0 ? nlohmann::json(stream / disk_bps) : nlohmann::json(nullptr)}};
}

nlohmann::json lookahead_json(Engine& engine) {
  const ExpertStore& x = engine.experts();
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < engine.cfg().n_layer; ++l) {
    const ExpertStats s = x.layer_stats(l);
    if (s.hits + s.misses == 0) continue;
    layers.push_back({{"layer", l},
                      {"ahead_1", rate(s.ahead_hits[0], s.ahead_total[0])},
                      {"ahead_2", rate(s.ahead_hits[1], s.ahead_total[1])}});
  }
  return layers;
}

void print_streaming_notes(Engine& engine, double disk_bps, const std::string& test, double ts,
                           double bytes_per_token) {
  const ExpertStore& x = engine.experts();
  std::printf("\nexperts read with %s", expert_io_name(x.io()));
  if (disk_bps > 0) {
    const double stream = ts * bytes_per_token;
    std::printf(
        "; disk O_DIRECT read rate %.2f GB/s (measured in this run); %s reads %.2f GB/s "
        "on average (t/s x bytes/token) = %.0f %% of it",
        disk_bps / 1e9, test.c_str(), stream / 1e9, 100 * stream / disk_bps);
  }
  std::printf("\n");
  if (!x.prefetching()) return;
  const ExpertStats t = x.total_stats();
  const auto pct = [](uint64_t h, uint64_t n) {
    return n > 0 ? 100.0 * static_cast<double>(h) / static_cast<double>(n) : 0.0;
  };
  std::printf(
      "lookahead hit %% (the next layers' routers on this layer's input; last timed run): "
      "1 ahead %.1f, 2 ahead %.1f; per MoE layer (1 / 2 ahead):",
      pct(t.ahead_hits[0], t.ahead_total[0]), pct(t.ahead_hits[1], t.ahead_total[1]));
  for (const auto& j : lookahead_json(engine)) {
    const auto one = [](const nlohmann::json& v) {
      return v.is_null() ? std::string("-")
                         : std::to_string(static_cast<int>(100 * v.get<double>()));
    };
    std::printf(" %lld:%s/%s", static_cast<long long>(j["layer"].get<int64_t>()),
                one(j["ahead_1"]).c_str(), one(j["ahead_2"]).c_str());
  }
  std::printf("\n");
}

}  // namespace ts::cli

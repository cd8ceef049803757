#include "cli/bench_image.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/sample_stats.h"
#include "vision/vision_tower.h"

namespace ts::cli {

double ImageEncodeResult::mean() const {
  return sample_mean(seconds);
}

double ImageEncodeResult::stddev() const {
  return sample_stddev(seconds);
}

std::vector<ImageEncodeResult> bench_image_encode(const ImageFlags& f, Engine& engine,
                                                  const std::string& model_path, int threads,
                                                  int reps) {
  const std::shared_ptr<VisionTower> vision = open_vision(f, engine, model_path, threads, true);
  std::vector<ImageEncodeResult> results;
  for (const std::string& path : f.images) {
    const std::vector<uint8_t> bytes = read_image_file(path);
    ImageEncodeResult r;
    r.file = std::filesystem::path(path).filename().string();
    for (int rep = -1; rep < reps; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const EncodedImage image = vision->encode_file(bytes.data(), bytes.size());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.tokens = image.tokens();
      if (rep >= 0) r.seconds.push_back(s);
    }
    results.push_back(std::move(r));
  }
  return results;
}

nlohmann::json image_encode_json(const std::vector<ImageEncodeResult>& results) {
  nlohmann::json j = nlohmann::json::array();
  for (const ImageEncodeResult& r : results)
    j.push_back({{"file", r.file},
                 {"tokens", r.tokens},
                 {"avg_ms", 1e3 * r.mean()},
                 {"stddev_ms", 1e3 * r.stddev()},
                 {"samples_ms", [&] {
                    std::vector<double> ms;
                    for (double s : r.seconds) ms.push_back(1e3 * s);
                    return ms;
                  }()}});
  return j;
}

void print_image_encode(const std::vector<ImageEncodeResult>& results, int threads) {
  std::printf("\n| image | tokens | threads | encode ms |\n| --- | ---: | ---: | ---: |\n");
  for (const ImageEncodeResult& r : results)
    std::printf("| %s | %lld | %d | %.1f ± %.1f |\n", r.file.c_str(),
                static_cast<long long>(r.tokens), threads, 1e3 * r.mean(), 1e3 * r.stddev());
}

}  // namespace ts::cli

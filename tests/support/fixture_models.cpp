#include "fixture_models.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"

namespace ts::test {

std::vector<FixtureForm> fixture_forms(const std::vector<std::string>& fixtures) {
  std::vector<FixtureForm> out;
  for (const std::string& name : fixtures) {
    const std::string shared = shared_path("fixtures/" + name);
    const std::string local = fixtures_dir() + "/models/" + name;
    const std::string dir = shared.empty() ? local : shared;
    if (!shared.empty() && file_exists(shared + "/hf/config.json"))
      out.push_back({name, "hf", shared + "/hf", dir});
    for (const char* dt : {"f32", "f16"}) {
      const std::string file = "/model-" + std::string(dt) + ".gguf";
      if (file_exists(dir + file)) out.push_back({name, dt, dir + file, dir});
    }
  }
  return out;
}

std::vector<int32_t> fixture_prompt(const FixtureForm& f) {
  const std::string path =
      file_exists(f.dir + "/meta.json") ? f.dir + "/meta.json" : f.dir + "/prompt.json";
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("prompt_ids").get<std::vector<int32_t>>();
}

std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

std::string LogitsComparison::summary() const {
  std::ostringstream s;
  s << "rel=" << rel << " argmax mismatches " << argmax_mismatches << "/" << rows_checked;
  return s.str();
}

LogitsComparison compare_logits(const std::vector<float>& x, const std::vector<float>& ref,
                                int64_t vocab) {
  LogitsComparison c;
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(x[i]) - ref[i]));
  }
  c.rel = max_diff / max_ref;
  // Argmax is only meaningful on rows whose reference top-1/top-2 gap exceeds 2e-3 * max|ref|.
  for (size_t r = 0; r < ref.size() / static_cast<size_t>(vocab); ++r) {
    const float* a = ref.data() + r * static_cast<size_t>(vocab);
    const float* b = x.data() + r * static_cast<size_t>(vocab);
    std::vector<float> sorted(a, a + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] <= 2e-3 * max_ref) continue;
    c.rows_checked++;
    if (std::max_element(a, a + vocab) - a != std::max_element(b, b + vocab) - b)
      c.argmax_mismatches++;
  }
  return c;
}

}  // namespace ts::test

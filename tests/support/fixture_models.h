// The random-init family fixtures: where each form (HF dir, GGUF of each dtype) of a fixture is,
// its prompt and reference logits, and the comparison the fixtures README prescribes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts::test {

struct FixtureForm {
  std::string fixture;  // e.g. "qwen3"
  std::string form;     // "hf", "f32", "f16"
  std::string path;     // model path to open
  std::string dir;      // folder holding ref_logits.f32 and the prompt
};

// Every form available: the repository's copies always, the shared ones when present.
std::vector<FixtureForm> fixture_forms(const std::vector<std::string>& fixtures);

std::vector<int32_t> fixture_prompt(const FixtureForm& f);
std::vector<float> read_f32_file(const std::string& path);

struct LogitsComparison {
  double rel = 0;            // max |x - ref| / max |ref|
  int64_t rows_checked = 0;  // rows whose top-1/top-2 gap makes argmax meaningful
  int64_t argmax_mismatches = 0;
  std::string summary() const;
};

LogitsComparison compare_logits(const std::vector<float>& x, const std::vector<float>& ref,
                                int64_t vocab);

}  // namespace ts::test

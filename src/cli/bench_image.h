// `bench --image FILE`: how long the model's vision tower takes to encode an image (decode,
// preprocessing, the ViT and its projector), as llama-mtmd-cli reports its "image slice encoded"
// time; one untimed encode first, then the bench's repetitions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/image_flags.h"
#include "runtime/engine.h"

namespace ts::cli {

struct ImageEncodeResult {
  std::string file;
  int64_t tokens = 0;           // the image's tokens in the prompt
  std::vector<double> seconds;  // per timed repetition
  double mean() const;
  double stddev() const;
};

std::vector<ImageEncodeResult> bench_image_encode(const ImageFlags& f, Engine& engine,
                                                  const std::string& model_path, int threads,
                                                  int reps);
nlohmann::json image_encode_json(const std::vector<ImageEncodeResult>& results);
void print_image_encode(const std::vector<ImageEncodeResult>& results, int threads);

}  // namespace ts::cli

// llama.cpp's importance matrix, as llama-imatrix writes it (GGUF): for each weight matrix
// "<name>.in_sum2", the sum over the tokens seen of each input column's squared activation (one
// row per expert), and "<name>.counts", the tokens seen (one per expert). `quantize --imatrix`
// weighs each column's quantisation error by the mean (quantize_search.h).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace ts {

class Imatrix {
 public:
  // Fails (Model) on a file that is not an imatrix GGUF (the legacy .dat format is not read), an
  // entry without its counts, or a non-f32 or non-finite value.
  static Imatrix load(const std::string& path);

  // The mean squared activation of each column, expert after expert (1 where an expert saw no
  // token, as llama.cpp), or null where the file has no entry for `tensor`.
  const std::vector<float>* find(const std::string& tensor) const;
  size_t size() const { return means_.size(); }

 private:
  std::unordered_map<std::string, std::vector<float>> means_;
};

}  // namespace ts

// A vision tower's weights, read from its ModelSource for the CPU backend: every tensor's shape
// and type checked as it is read (errors name the file and tensor), vectors as host floats,
// matrices as backend weights, and the linear layers' y = x W^T + b.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_source.h"

namespace ts {

class VisionWeights {
 public:
  struct Linear {
    Weight w;
    std::vector<float> b;
  };
  struct Norm {
    std::vector<float> w, b;
  };

  // `tower` names the tower in errors ("Qwen3-VL vision").
  VisionWeights(const ModelSource& source, Backend& cpu, std::string tower)
      : source_(source), cpu_(cpu), tower_(std::move(tower)) {}

  // The tensor, its dims (GGML order: the fastest-varying first) checked; a vector must be f32,
  // f16 or bf16, a matrix of a type the matmul kernels take.
  TensorRef need(const std::string& name, const std::vector<int64_t>& dims) const;
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& dims) const;
  Linear linear(const std::string& w, const std::string& b, int64_t in, int64_t out) const;
  Norm norm(const std::string& w, const std::string& b, int64_t n) const;
  void apply(const Linear& l, const float* x, int64_t rows, float* y) const;

 private:
  const ModelSource& source_;
  Backend& cpu_;
  std::string tower_;
};

}  // namespace ts

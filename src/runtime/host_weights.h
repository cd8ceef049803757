// The weights of a stack that runs on the CPU only (the vision towers, the BERT encoder), read from
// its ModelSource for the CPU backend: every tensor's shape and type checked as it is read (errors
// name the file and tensor), vectors as host floats, matrices as backend weights, and the linear
// layers' y = x W^T + b.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_source.h"

namespace ts {

class ThreadPool;

class HostWeights {
 public:
  struct Linear {
    Weight w;
    std::vector<float> b;  // empty: no bias
  };
  struct Norm {
    std::vector<float> w, b;
  };

  // `tower` names the stack in errors ("Qwen3-VL vision", "bert encoder").
  HostWeights(const ModelSource& source, Backend& cpu, std::string tower)
      : source_(source), cpu_(cpu), tower_(std::move(tower)) {}

  // The tensor, its dims (GGML order: the fastest-varying first; a negative one takes any size)
  // checked; a vector must be f32, f16 or bf16, a matrix of a type the matmul kernels take.
  TensorRef need(const std::string& name, const std::vector<int64_t>& dims) const;
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& dims) const;
  Linear linear(const std::string& w, const std::string& b, int64_t in, int64_t out) const;
  Linear linear(const std::string& w, int64_t in, int64_t out) const;  // without a bias
  // A fused projection without biases (q, k and v stacked as one matrix) as one Linear per block
  // of consecutive output rows, `outs` rows each: views of the tensor's rows, nothing copied.
  std::vector<Linear> linear_parts(const std::string& w, int64_t in,
                                   const std::vector<int64_t>& outs) const;
  Norm norm(const std::string& w, const std::string& b, int64_t n) const;
  void apply(const Linear& l, const float* x, int64_t rows, float* y) const;
  // The rest of a pre-LN ViT block after its attention: x += out(att), then
  // x += fc2(gelu(fc1(LN(x)))); h [rows][width] and ff [rows][fc1's width] are scratch.
  void block_tail(ThreadPool& pool, const Linear& out, const float* att, const Norm& ln,
                  const Linear& fc1, const Linear& fc2, float eps, bool gelu_tanh, int64_t rows,
                  float* x, float* h, float* ff) const;

 private:
  const ModelSource& source_;
  Backend& cpu_;
  std::string tower_;
};

// y = x W^T + b (no b: x W^T) of `rows` rows, on `cpu`.
void apply_linear(Backend& cpu, const HostWeights::Linear& l, const float* x, int64_t rows,
                  float* y);

}  // namespace ts

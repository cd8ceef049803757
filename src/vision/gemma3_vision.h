// Gemma 3's vision tower on the CPU, batched over an image's patches: SigLIP's encoder and
// Gemma 3's multimodal projector (transformers' SiglipVisionModel, Gemma3MultiModalProjector):
//   x = Conv2d patch embedding (a matmul over each patch's C x P x P values) + bias
//     + the learned position of each patch (the image is always image_size square)
//   per block: x += out(attention(q, k, v of LN1 x)); x += fc2(gelu_tanh(fc1(LN2 x)))
//     (attention bidirectional over the image's patches, no rotary)
//   LayerNorm (post_layernorm): the tower's output, one row a patch
//   projector: average pool of each k x k window of patches to mm_tokens_per_image tokens,
//     RMSNorm with Gemma's (1 + w), then a projection to the text model's width
// Weights from the mmproj GGUF of llama.cpp's converter (projector type gemma3) or an HF
// directory (vision_tower.vision_model.*, multi_modal_projector.*).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "model/model_source.h"
#include "runtime/host_weights.h"
#include "vision/host_tower.h"

namespace ts {

struct Gemma3VisionConfig {
  int64_t hidden = 0, heads = 0, depth = 0, ff = 0;
  int64_t image_size = 0, patch = 0;
  int64_t pool = 0;        // patches per pooled token side
  int64_t out_hidden = 0;  // the text model's width
  float eps = 1e-6f;       // the LayerNorms' and the soft embedding norm's
  bool mlp_gelu_tanh = true;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  double rescale = 1.0 / 255.0;

  int64_t side() const { return image_size / patch; }  // patches per image side
  int64_t tokens_side() const { return side() / pool; }
  int64_t tokens() const { return tokens_side() * tokens_side(); }
  int64_t patch_values() const { return 3 * patch * patch; }
};

class Gemma3Vision : public HostTower {
 public:
  // Opens and checks every tensor (errors name the file and tensor or key).
  static std::unique_ptr<Gemma3Vision> open(const std::string& path, int threads);
  ~Gemma3Vision() override;

  const Gemma3VisionConfig& config() const { return c_; }
  int64_t out_hidden() const override { return c_.out_hidden; }
  int64_t n_deepstack() const override { return 0; }
  ImageLayout layout() const override { return ImageLayout::Bidirectional; }
  const char* name() const override { return "Gemma 3's"; }
  bool feeds(const ArchConfig& text) const override { return text.family == Family::Gemma3; }
  // Gemma3Processor's full_image_sequence: "\n\n<start_of_image>...<end_of_image>\n\n".
  std::string block_margin() const override { return "\n\n"; }
  void set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) override;
  EncodedImage encode_file(const uint8_t* data, size_t size) override;

  // The processor's output [3][image_size][image_size] through the tower: its output
  // [side * side][hidden] (post-LayerNorm), then the projector's, the image's features.
  std::vector<float> tower(const float* pixels);
  EncodedImage project(const std::vector<float>& tower_out);

 private:
  using Linear = HostWeights::Linear;
  using Norm = HostWeights::Norm;
  struct Block {
    Norm ln1, ln2;
    Linear q, k, v, out, fc1, fc2;
  };

  Gemma3Vision() = default;
  void load();

  Gemma3VisionConfig c_;
  Linear patch_;
  std::vector<float> pos_table_;  // [side * side][hidden]
  std::vector<Block> blocks_;
  Norm post_;
  std::vector<float> soft_norm_;  // 1 + w
  std::vector<float> proj_host_;  // [out_hidden][hidden], the projection transposed
  Weight proj_;
};

}  // namespace ts

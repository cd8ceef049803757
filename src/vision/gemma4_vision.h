// Gemma 4's vision tower on the CPU, batched over an image's patches (transformers'
// Gemma4VisionModel and Gemma4MultimodalEmbedder):
//   x = input_proj(2 * pixels - 1) (no bias) + the learned x and y positions of each patch
//   per block (RMSNorms scaling by w, GELU-tanh):
//     q, k, v = projections of norm(x); q, k RMS-normed per head (weights), v without a weight;
//     2-D rotary on q and k: the first half of each head rotates by the patch's column, the
//     second by its row (NeoX pairs within each half, base rope_theta); attention over all the
//     image's patches with scale 1
//     x += post_attn_norm(o(att)); x += post_ffn_norm(down(gelu(gate(h)) * up(h))), h = norm(x)
//     (each linear optionally clamping its input and output: "clipped linears")
//   pooler: the mean of each pool x pool window of patches, times sqrt(hidden); optionally
//     standardised, (x - std_bias) * std_scale: the tower's output, one row a soft token
//   embedder: RMSNorm without a weight, then a projection to the text model's width
// The number of soft tokens follows the image's aspect ratio (gemma4_patches). Weights from the
// mmproj GGUF of llama.cpp's converter (projector type gemma4v) or an HF directory
// (model.vision_tower.*, model.embed_vision.*).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "model/model_source.h"
#include "runtime/host_weights.h"
#include "vision/host_tower.h"
#include "vision/image_preprocess.h"

namespace ts {

struct Gemma4VisionConfig {
  int64_t hidden = 0, heads = 0, head_dim = 0, depth = 0, ff = 0;
  int64_t patch = 0;
  int64_t pool = 3;               // patches per soft token side
  int64_t pos_size = 0;           // rows of each of the x and y position tables
  int64_t out_hidden = 0;         // the text model's width
  int64_t max_soft_tokens = 280;  // the processor's (an mmproj GGUF has none: its default)
  float eps = 1e-6f;
  float rope_theta = 100.0f;
  double rescale = 1.0 / 255.0;

  int64_t patch_values() const { return 3 * patch * patch; }
};

class Gemma4Vision : public HostTower {
 public:
  // Opens and checks every tensor (errors name the file and tensor or key).
  static std::unique_ptr<Gemma4Vision> open(const std::string& path, int threads);
  ~Gemma4Vision() override;

  const Gemma4VisionConfig& config() const { return c_; }
  int64_t out_hidden() const override { return c_.out_hidden; }
  int64_t n_deepstack() const override { return 0; }
  ImageLayout layout() const override { return ImageLayout::Bidirectional; }
  const char* name() const override { return "Gemma 4's"; }
  bool feeds(const ArchConfig& text) const override { return text.family == Family::Gemma4; }
  void set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) override;
  void set_max_tokens(int64_t max_tokens) override;
  EncodedImage encode_file(const uint8_t* data, size_t size) override;

  // The processor's patches (gemma4_patches) through the tower: its output
  // [soft tokens][hidden] (pooled, scaled and standardised), then the embedder's, the image's
  // features. Errors (ErrorKind::Input): a grid the position tables or the pooling do not take.
  std::vector<float> tower(const ImagePatches& patches);
  EncodedImage project(const std::vector<float>& tower_out, int64_t grid_h, int64_t grid_w);

 private:
  struct Linear {
    Weight w;
    float in_lo, in_hi, out_lo, out_hi;  // the clamps (infinite: none)
  };
  struct Block {
    std::vector<float> norm_in, norm_post_attn, norm_pre_ffn, norm_post_ffn, q_norm, k_norm;
    Linear q, k, v, o, gate, up, down;
  };

  Gemma4Vision() = default;
  void load();
  Linear linear(const std::string& base, const std::string& weight, int64_t in, int64_t out);
  // y = clamp(W clamp(x)); x is left as it was (scratch takes the clamped copy).
  void apply(const Linear& l, const float* x, int64_t rows, float* y);
  void rope(float* x, const std::vector<float>& cos, const std::vector<float>& sin, int64_t rows);

  Gemma4VisionConfig c_;
  std::string v_, mm_;  // tensor name prefixes
  // [hidden][3 * patch * patch], columns in the processor's order (the CPU backend's weight
  // reads this host copy)
  std::vector<float> patch_host_;
  Weight patch_;
  std::vector<float> pos_table_;  // [2][pos_size][hidden]: x, then y
  std::vector<Block> blocks_;
  std::vector<float> std_bias_, std_scale_;  // empty: no standardisation
  std::vector<float> ones_;                  // the weightless norms' weight
  Weight proj_;                              // [out_hidden][hidden]
  std::vector<float> clamped_;               // apply()'s scratch
};

}  // namespace ts

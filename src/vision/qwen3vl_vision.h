// Qwen3-VL's vision tower on the CPU, batched over an image's patches:
//   x  = Conv3d patch embedding (a matmul over each patch's C x T x P x P values) + bias
//      + the learned position table resampled bilinearly (align_corners) to the patch grid
//   per block: x += proj(attention(rotary2d(qkv(LN1 x)))); x += fc2(gelu(fc1(LN2 x)))
//     (attention bidirectional over the image's patches; the 2-D rotary turns the first half of
//      each head's pairs by the patch's row, the second half by its column)
//   DeepStack: after the listed blocks, a merger over each 2 x 2 window (LayerNorm of the four
//     patches side by side, fc1, GELU, fc2) gives that layer's feature of each merged token
//   output: the final merger (LayerNorm per patch, then the four side by side, fc1, GELU, fc2)
// Weights from the mmproj GGUF of llama.cpp's converter or an HF directory (model.visual.*).
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
#include "vision/image_rows.h"
#include "vision/vision_config.h"

namespace ts {

class Qwen3VLVision : public HostTower {
 public:
  // Opens and checks every tensor (errors name the file and tensor).
  static std::unique_ptr<Qwen3VLVision> open(const std::string& path, int threads);
  ~Qwen3VLVision() override;

  const VisionConfig& config() const { return c_; }
  // The image processor that feeds this tower (its pixel bounds from the HF directory's
  // preprocessor_config.json, Qwen3-VL's defaults for an mmproj GGUF, or set_pixel_bounds()).
  const ProcessorConfig& processor() const { return processor_; }
  void set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) override;
  EncodedImage encode_file(const uint8_t* data, size_t size) override;
  int64_t out_hidden() const override { return c_.out_hidden; }
  int64_t n_deepstack() const override { return static_cast<int64_t>(c_.deepstack_layers.size()); }
  ImageLayout layout() const override { return ImageLayout::MRope; }
  const char* name() const override { return "Qwen3-VL's"; }
  bool feeds(const ArchConfig& text) const override { return text.mrope(); }
  // One image: pixel values [grid_h * grid_w][patch_values()] in the processor's order (each
  // merge window's patches together, windows in raster order), grid in patches (multiples of
  // merge). The result's grid is in merged tokens.
  EncodedImage encode(const float* pixels, int64_t grid_h, int64_t grid_w);

 private:
  using Linear = HostWeights::Linear;
  using Norm = HostWeights::Norm;
  struct Block {
    Norm ln1, ln2;
    Linear qkv, proj, fc1, fc2;
  };
  struct Merger {
    Norm norm;  // over one patch (final merger) or four side by side (DeepStack)
    Linear fc1, fc2;
  };

  Qwen3VLVision() = default;
  void load();
  Merger merger(const std::string& prefix, bool gguf_final, int64_t norm_width);
  std::vector<float> run_merger(const Merger& m, const float* x, int64_t patches, bool per_patch);

  VisionConfig c_;
  ProcessorConfig processor_;
  std::vector<float> patch_host_;  // the GGUF's two per-frame kernels as one [hidden][C][T][P][P]
  Linear patch_;
  std::vector<float> pos_table_;  // [n_pos][hidden]
  std::vector<Block> blocks_;
  Merger final_;
  std::vector<Merger> deepstack_;
  std::vector<float> inv_freq_;  // [head_dim / 2]: the row's frequencies, then the column's
  std::vector<uint8_t> streams_;
};

}  // namespace ts

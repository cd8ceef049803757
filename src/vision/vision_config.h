// The shape of Qwen3-VL's vision tower, read from the mmproj GGUF that llama.cpp's converter
// writes (`clip.vision.*`, projector type qwen3vl_merger) or from an HF directory's vision_config
// (plus preprocessor_config.json for the normalisation).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

class ModelSource;

struct VisionConfig {
  int64_t hidden = 0;      // the tower's width
  int64_t heads = 0;       // attention heads (head_dim = hidden / heads)
  int64_t depth = 0;       // blocks
  int64_t ff = 0;          // MLP width
  int64_t patch = 0;       // pixels per patch side
  int64_t temporal = 2;    // frames per patch (an image is repeated to fill them)
  int64_t merge = 2;       // patches per merged token side
  int64_t out_hidden = 0;  // the merger's output: the text model's width
  int64_t n_pos = 0;       // learned position table rows (a square grid of side pos_side())
  int64_t channels = 3;
  float eps = 1e-6f;  // LayerNorm
  float rope_theta = 10000.0f;
  bool mlp_gelu_tanh = true;  // the blocks' MLP: GELU with the tanh approximation (else erf)
  std::vector<int64_t> deepstack_layers;  // blocks whose output feeds a DeepStack merger, in order
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  // The processor's pixel bounds (preprocessor_config.json's size.shortest_edge / longest_edge;
  // an mmproj GGUF has none: Qwen3-VL's published defaults).
  int64_t min_pixels = 65536, max_pixels = 16777216;

  int64_t head_dim() const { return hidden / heads; }
  int64_t pos_side() const;
  int64_t patch_values() const { return channels * temporal * patch * patch; }
};

// Reads and checks the configuration; errors (ErrorKind::Model) name the file and key.
VisionConfig read_vision_config(const ModelSource& source);

// An mmproj GGUF's clip.vision.image_mean / image_std, where it has them.
void read_gguf_normalisation(const ModelSource& source, std::array<float, 3>& mean,
                             std::array<float, 3>& std);

}  // namespace ts

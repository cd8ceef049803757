// ImageRows: a prompt's token ids with image placeholders, and the encoded images, turned into
// what the forward pass takes per row (RowInputs): each placeholder row's vision feature and
// DeepStack features, and, by the model's layout, either every row's M-RoPE positions as Qwen3-VL
// lays them out (transformers' get_rope_index: text rows count on from the largest position
// before them; an image's rows of a merged grid h x w share T = s and take H = s + y, W = s + x,
// where s is the position after the text before it), or Gemma 3's: ordinary positions, each
// image row attending to its image's later rows too (transformers' token_type_ids mask), or
// ordinary positions and a causal mask (Gemma 4's small models).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/seq_chunk.h"

namespace ts {

enum class ImageLayout { MRope, Bidirectional, Causal };

// One image through the vision tower: its grid of merged tokens (one frame) and their features.
struct EncodedImage {
  int64_t grid_h = 0, grid_w = 0;  // tokens = grid_h * grid_w
  std::vector<float> embeds;       // [tokens][width]
  std::vector<float> deepstack;    // [n_deepstack][tokens][width]
  uint64_t key = 0;                // identifies the image (a hash of its file's bytes); 0: unknown
  int64_t tokens() const { return grid_h * grid_w; }
};

class ImageRows {
 public:
  // Each maximal run of `image_token` in ids is one image, in order; its length must be that
  // image's token count. Errors (ErrorKind::Input) name the mismatch.
  ImageRows(const std::vector<int32_t>& ids, int32_t image_token,
            const std::vector<EncodedImage>& images, int64_t width, int64_t n_deepstack,
            ImageLayout layout = ImageLayout::MRope);

  // Views into this object (it copies the features), row i for ids[i]; valid while it lives.
  RowInputs inputs() const;
  const std::vector<int32_t>& rope_pos() const { return rope_pos_; }  // [n][3]: MRope only
  // What row i holds for a prompt cache: 0 for a text row, else its image's key mixed with the
  // row's place in the image (0 past the end).
  uint64_t key(int64_t row) const {
    return row >= 0 && row < static_cast<int64_t>(keys_.size()) ? keys_[static_cast<size_t>(row)]
                                                                : 0;
  }

 private:
  ImageLayout layout_;
  std::vector<int32_t> rope_pos_;  // MRope: [n][3]
  std::vector<int32_t> span_;      // Bidirectional: [n]
  std::vector<uint64_t> keys_;
  std::vector<float> embed_data_;  // [image rows][width]
  std::vector<float> deepstack_;   // [image rows][n_deepstack][width]
  std::vector<const float*> embeds_, deepstack_rows_;
};

}  // namespace ts

// FP8 block-quantised checkpoints (DeepSeek-V3 / R1, Kimi K2, GLM's FP8 releases): each weight
// float8_e4m3fn beside `<name>_scale_inv`, one float32 (or bf16) factor per block of
// block_rows x block_cols elements (quantization_config.weight_block_size, 128 x 128), edge blocks
// partial. Dequantised once at open, exactly, to float32 in anonymous memory: the model then reads
// them as any float32 checkpoint (four bytes a weight: a checkpoint that does not fit so is
// quantised first).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace ts {

struct Fp8Weight {
  const SafetensorsTensor* weight;  // F8_E4M3, 2-D
  const SafetensorsFile* weight_file;
  const SafetensorsTensor* scale;  // nullptr: refused, naming the weight
  const SafetensorsFile* scale_file;
};

// The value of one float8_e4m3fn byte (NaN for 0x7f / 0xff; the format has no infinities).
float fp8_e4m3_value(uint8_t b);

// Every weight dequantised (value x its block's scale) into one float32 safetensors file held in
// anonymous memory, its tensors named as the weights. A missing scale, one of another shape than
// ceil(rows / block_rows) x ceil(cols / block_cols) or not float is an error naming the tensor.
std::unique_ptr<SafetensorsFile> dequantise_fp8_blocks(const std::vector<Fp8Weight>& weights,
                                                       int64_t block_rows, int64_t block_cols,
                                                       const std::string& where);

}  // namespace ts

// llama.cpp's per-tensor type rules for its quantisation mixes (llama-quant.cpp's
// llama_tensor_get_type): which tensors a mix keeps at higher precision, by tensor kind, layer
// position and model shape. Used by plan_quantize.
#pragma once

#include <cstdint>
#include <string>

#include "quant/dtype.h"

namespace ts {

// llama_ftype ids of the mixes `quantize` writes (general.file_type).
namespace ftype {
inline constexpr int64_t kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9,
                         kQ2_K = 10, kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14,
                         kQ4_K_M = 15, kQ5_K_S = 16, kQ5_K_M = 17, kQ6_K = 18, kQ2_K_S = 21,
                         kIQ2_XXS = 19, kIQ2_XS = 20, kIQ3_XXS = 23, kIQ1_S = 24, kIQ4_NL = 25,
                         kIQ3_S = 26, kIQ3_M = 27, kIQ2_S = 28, kIQ2_M = 29, kIQ4_XS = 30,
                         kIQ1_M = 31, kBF16 = 32, kTQ1_0 = 36, kTQ2_0 = 37;
}  // namespace ftype

// What the rules read of the model.
struct MixModel {
  int64_t n_expert = 0;
  int64_t n_gqa = 1;         // attention heads per KV head
  int64_t n_layer = 0;       // block_count
  bool is_70b = false;       // llama.cpp's LLM_TYPE_70B (a llama of 80 layers with grouped KV)
  bool tied_output = false;  // no output.weight: token_embd.weight is also the output
  bool has_imatrix = false;
};

// A tensor's place among those of its kind, counted as llama.cpp counts them (tensors ordered by
// layer, then name): attn_v-like tensors (attn_v, attn_qkv, attn_kv_b) and ffn_down ones.
struct MixPosition {
  int i_attn_v = 0;
  int n_attn_v = 0;
  int i_ffn_down = 0;
};

// The type of the quantisable matrix `name` (rows of row_len) in the mix `file_type` whose
// default type is `base`: the mix's upgrades, then llama.cpp's fallback for rows that are not
// whole blocks (row_fallback_dtype). Fails (Model) on an expert-model tensor whose layer it cannot
// read from the name.
DType mix_tensor_type(int64_t file_type, DType base, const std::string& name, uint64_t row_len,
                      const MixModel& m, const MixPosition& pos);

// True where llama.cpp refuses to write `name` as `t` without an importance matrix: the i-quants
// of 1.56..3.06 bits, whose grid searches are poor on unweighted rows, except for the token
// embedding and output (llama.cpp's tensor_requires_imatrix; q2_k_s is its QuantizeType's flag).
bool type_needs_imatrix(const std::string& name, DType t);

// True for the kinds counted in MixPosition.
bool is_attn_v_like(const std::string& name);
bool is_ffn_down(const std::string& name);

}  // namespace ts

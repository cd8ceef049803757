#include "model/quantize_rules.h"

#include <cstdio>

#include "core/error.h"
#include "quant/row_fallback.h"

namespace ts {
namespace {

// llama-quant.cpp's tensor categories, matched on the name in its order.
enum class Kind {
  Output,
  TokenEmbd,
  AttnVLike,
  AttnK,
  AttnQ,
  AttnOutput,
  FfnUp,
  FfnGate,
  FfnDown,
  Other
};

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

Kind kind_of(const std::string& n) {
  if (n == "output.weight") return Kind::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Kind::TokenEmbd;
  if (has(n, "attn_qkv.weight") || has(n, "attn_kv_b.weight") || has(n, "attn_v.weight"))
    return Kind::AttnVLike;
  if (has(n, "attn_k.weight")) return Kind::AttnK;
  if (has(n, "attn_q.weight")) return Kind::AttnQ;
  if (has(n, "attn_output.weight")) return Kind::AttnOutput;
  if (has(n, "ffn_up")) return Kind::FfnUp;
  if (has(n, "ffn_gate")) return Kind::FfnGate;
  if (has(n, "ffn_down")) return Kind::FfnDown;
  return Kind::Other;
}

// The layers llama.cpp gives more bits: the first and last eighth and every third between.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

DType attn_v_type(int64_t ft, DType to, const MixModel& m, const MixPosition& p) {
  using namespace ftype;
  if (ft == kQ2_K)
    to = m.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
  else if (ft == kQ2_K_S && m.n_gqa >= 4)
    to = DType::Q4_K;
  else if (ft == kQ3_K_M)
    to = p.i_attn_v < 2 ? DType::Q5_K : DType::Q4_K;
  else if (ft == kQ3_K_L)
    to = DType::Q5_K;
  else if ((ft == kIQ4_NL || ft == kIQ4_XS) && m.n_gqa >= 4)
    to = DType::Q5_K;
  else if ((ft == kQ4_K_M || ft == kQ5_K_M) && use_more_bits(p.i_attn_v, p.n_attn_v))
    to = DType::Q6_K;
  else if (ft == kQ4_K_S && p.i_attn_v < 4)
    to = DType::Q5_K;
  // A 70B llama shares each attn_v among 8 heads: more bits cost little there.
  if (m.is_70b && (to == DType::Q3_K || to == DType::Q4_K)) to = DType::Q5_K;
  // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
  if (m.n_expert == 8) to = DType::Q8_0;
  return to;
}

DType ffn_down_type(int64_t ft, DType to, int i, int n, bool has_imatrix) {
  using namespace ftype;
  if (ft == kQ2_K) return DType::Q3_K;
  if (ft == kQ2_K_S) return i < n / 8 ? DType::Q4_K : to;
  if (ft == kQ3_K_M) return i < n / 16 ? DType::Q5_K : DType::Q4_K;
  if (ft == kQ3_K_L) return DType::Q5_K;
  if (ft == kQ4_K_M) return use_more_bits(i, n) ? DType::Q6_K : to;
  if ((ft == kIQ4_NL || ft == kIQ4_XS) && i < n / 8 && !has_imatrix) return DType::Q5_K;
  if (ft == kQ5_K_M && use_more_bits(i, n)) return DType::Q6_K;
  if (ft == kQ4_K_S && i < n / 8) return DType::Q5_K;
  // With an imatrix, q4_0 / q5_0 guard the first ffn_down layers with their affine kin.
  if ((ft == kQ4_0 || ft == kQ5_0) && has_imatrix && i < n / 8)
    return ft == kQ4_0 ? DType::Q4_1 : DType::Q5_1;
  return to;
}

DType attn_output_type(int64_t ft, DType to, const MixModel& m) {
  using namespace ftype;
  if (m.n_expert == 8) {
    const bool up = ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL ||
                    ft == kQ4_K_S || ft == kQ4_K_M || ft == kIQ4_XS;
    return up ? DType::Q5_K : to;
  }
  if (ft == kQ2_K) return DType::Q3_K;
  if (ft == kQ3_K_M) return DType::Q4_K;
  if (ft == kQ3_K_L) return DType::Q5_K;
  return to;
}

// The layer of an expert model's tensor, from its name (experts need not be stored in order).
int layer_of(const std::string& name, int64_t n_layer) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= n_layer)
    fail(ErrorKind::Model, "quantize: cannot read the layer (of " + std::to_string(n_layer) +
                               ") of tensor '" + name + "'");
  return layer;
}

}  // namespace

bool is_attn_v_like(const std::string& name) {
  return kind_of(name) == Kind::AttnVLike;
}

bool is_ffn_down(const std::string& name) {
  return kind_of(name) == Kind::FfnDown;
}

DType mix_tensor_type(int64_t file_type, DType base, const std::string& name, uint64_t row_len,
                      const MixModel& m, const MixPosition& pos) {
  DType to = base;
  switch (kind_of(name)) {
    case Kind::Output:
    case Kind::TokenEmbd:
      if (kind_of(name) == Kind::TokenEmbd && !m.tied_output) break;
      if (row_len % dtype_info(base).block_elems != 0)
        to = DType::Q8_0;
      else if (base != DType::Q8_0)
        to = DType::Q6_K;
      break;
    case Kind::AttnVLike:
      to = attn_v_type(file_type, base, m, pos);
      break;
    case Kind::AttnK:
      if (m.n_expert == 8) to = DType::Q8_0;
      break;
    case Kind::FfnDown: {
      const int layer = m.n_expert > 1 ? layer_of(name, m.n_layer) : pos.i_ffn_down;
      to = ffn_down_type(file_type, base, layer, static_cast<int>(m.n_layer), m.has_imatrix);
      break;
    }
    case Kind::AttnOutput:
      to = attn_output_type(file_type, base, m);
      break;
    default:
      break;
  }
  return row_fallback_dtype(to, row_len);
}

}  // namespace ts

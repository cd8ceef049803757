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
  else if (ft == kIQ3_XXS)
    to = m.n_gqa >= 4 ? DType::Q4_K : !m.has_imatrix ? DType::IQ3_S : DType::IQ3_XXS;
  else if ((ft == kIQ3_S && m.n_gqa >= 4) || ft == kIQ3_M)
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

DType ffn_down_type(int64_t ft, DType to, int i, int n, const MixModel& m) {
  using namespace ftype;
  const bool has_imatrix = m.has_imatrix;
  if (ft == kQ2_K) return DType::Q3_K;
  if (ft == kQ2_K_S) return i < n / 8 ? DType::Q4_K : to;
  if (ft == kIQ3_XXS && !has_imatrix) return i < n / 8 ? DType::Q4_K : DType::Q3_K;
  if (ft == kQ3_K_M) return i < n / 16 ? DType::Q5_K : DType::Q4_K;
  if (ft == kIQ3_M && (i < n / 8 || (m.n_expert == 8 && use_more_bits(i, n)))) return DType::Q4_K;
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
    const bool up = ft == kQ2_K || ft == kIQ3_XXS || ft == kQ3_K_S || ft == kQ3_K_M ||
                    ft == kIQ4_NL || ft == kQ4_K_S || ft == kQ4_K_M || ft == kIQ3_S ||
                    ft == kIQ3_M || ft == kIQ4_XS;
    return up ? DType::Q5_K : to;
  }
  if (ft == kQ2_K) return DType::Q3_K;
  if (ft == kIQ3_XXS) return DType::IQ3_S;
  if (ft == kQ3_K_M || ft == kIQ3_M) return DType::Q4_K;
  if (ft == kQ3_K_L) return DType::Q5_K;
  return to;
}

// The mixes of 1.56..2.5 bits: llama.cpp gives their attention and first ffn_down tensors
// rules of their own, in place of every other mix's.
bool is_sub3bit_iq(int64_t ft) {
  using namespace ftype;
  return ft == kIQ2_XXS || ft == kIQ2_XS || ft == kIQ1_S || ft == kIQ2_S || ft == kIQ2_M ||
         ft == kIQ1_M;
}

// Their guard type: iq3_s for the 2.5-bit mixes, q2_k below.
DType sub3bit_guard(int64_t ft) {
  return ft == ftype::kIQ2_S || ft == ftype::kIQ2_M ? DType::IQ3_S : DType::Q2_K;
}

// The sub-3-bit i-quant mixes' rules: more bits for attn_v (q4_k where it is shared by heads or
// experts), attn_k of 8-expert models, the first eighth of the ffn_down tensors (counted, not by
// layer, as llama.cpp counts them) and attn_output.
DType sub3bit_type(int64_t ft, DType to, Kind kind, const MixModel& m, const MixPosition& p) {
  using namespace ftype;
  switch (kind) {
    case Kind::AttnVLike:
      return m.n_gqa >= 4 || m.n_expert >= 4 ? DType::Q4_K : sub3bit_guard(ft);
    case Kind::AttnK:
      return m.n_expert == 8 ? DType::Q4_K : to;
    case Kind::FfnDown:
      return p.i_ffn_down < m.n_layer / 8 ? sub3bit_guard(ft) : to;
    case Kind::AttnOutput:
      if (m.n_expert == 8) return DType::Q5_K;
      if (ft == kIQ1_S || ft == kIQ1_M) return DType::IQ2_XXS;
      return ft == kIQ2_S || ft == kIQ2_M ? DType::IQ3_S : to;
    default:
      return to;
  }
}

// The output matrix (or a tied token embedding): q8_0 for rows that are not whole blocks of the
// mix's type, q5_k for the sub-3-bit i-quant mixes and iq3_xxs, q6_k otherwise.
DType output_type(int64_t ft, DType base, uint64_t row_len) {
  if (row_len % dtype_info(base).block_elems != 0) return DType::Q8_0;
  if (is_sub3bit_iq(ft) || ft == ftype::kIQ3_XXS) return DType::Q5_K;
  return base != DType::Q8_0 ? DType::Q6_K : base;
}

// An untied token embedding: its rows are looked up, not multiplied, so an imatrix has no entry
// for it; the lowest mixes give it a type that needs none (q2_k, iq3_s; q4_k for the ternary
// mixes, whose ternary type would ruin an embedding trained in floats).
DType token_embd_type(int64_t ft, DType to) {
  using namespace ftype;
  if (ft == kIQ2_XXS || ft == kIQ2_XS || ft == kIQ1_S || ft == kIQ1_M) return DType::Q2_K;
  if (ft == kIQ2_S || ft == kIQ2_M || ft == kIQ3_XXS) return DType::IQ3_S;
  if (ft == kTQ1_0 || ft == kTQ2_0) return DType::Q4_K;
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

bool type_needs_imatrix(const std::string& name, DType t) {
  const Kind k = kind_of(name);
  if (k == Kind::Output || k == Kind::TokenEmbd) return false;
  return t == DType::IQ3_XXS || t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ2_S ||
         t == DType::IQ1_M || t == DType::IQ1_S;
}

DType mix_tensor_type(int64_t file_type, DType base, const std::string& name, uint64_t row_len,
                      const MixModel& m, const MixPosition& pos) {
  using namespace ftype;
  DType to = base;
  const Kind kind = kind_of(name);
  if (kind == Kind::Output || (kind == Kind::TokenEmbd && m.tied_output)) {
    to = output_type(file_type, base, row_len);
  } else if (kind == Kind::TokenEmbd) {
    to = token_embd_type(file_type, base);
  } else if (is_sub3bit_iq(file_type)) {
    to = sub3bit_type(file_type, base, kind, m, pos);
  } else {
    switch (kind) {
      case Kind::AttnVLike:
        to = attn_v_type(file_type, base, m, pos);
        break;
      case Kind::AttnK:
        if (m.n_expert == 8)
          to = DType::Q8_0;
        else if (file_type == kIQ3_XXS)
          to = DType::IQ2_S;
        break;
      case Kind::AttnQ:
        if (file_type == kIQ3_XXS) to = DType::IQ2_S;
        break;
      case Kind::FfnDown: {
        const int layer = m.n_expert > 1 ? layer_of(name, m.n_layer) : pos.i_ffn_down;
        to = ffn_down_type(file_type, base, layer, static_cast<int>(m.n_layer), m);
        break;
      }
      case Kind::AttnOutput:
        to = attn_output_type(file_type, base, m);
        break;
      default:
        break;
    }
  }
  return row_fallback_dtype(to, row_len);
}

}  // namespace ts

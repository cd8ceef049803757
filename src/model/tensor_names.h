// The one tensor-name map: canonical roles <-> GGUF names (llama.cpp's `blk.N.attn_q.weight`) and
// Hugging Face names (`model.layers.N.self_attn.q_proj.weight`), which differ by family for the
// MoE block and Gemma's norms.
#pragma once

#include <string>

#include "model/arch_config.h"

namespace ts {

enum class GlobalTensor { TokenEmbd, OutputNorm, Output, RopeFreqs };

enum class LayerTensor {
  AttnNorm,
  Wq,
  Wk,
  Wv,
  Wo,
  Bq,
  Bk,
  Bv,
  QNorm,
  KNorm,
  AttnPostNorm,
  FfnNorm,
  FfnPostNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  Router,
  RouterBias,
  ExpGate,
  ExpUp,
  ExpDown,
};

const char* role_name(LayerTensor t);

std::string gguf_name(GlobalTensor t);
// For ExpGate/ExpUp/ExpDown: the stacked [cols, rows, n_expert] tensor holding every expert.
std::string gguf_name(LayerTensor t, int64_t layer);

// "" when the family has no HF name for that role (e.g. RopeFreqs).
std::string hf_name(Family f, GlobalTensor t);
// `expert` selects one expert's tensor for ExpGate/ExpUp/ExpDown (HF stores them one by one).
std::string hf_name(Family f, LayerTensor t, int64_t layer, int64_t expert = -1);

}  // namespace ts

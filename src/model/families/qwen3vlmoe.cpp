// qwen3vlmoe: Qwen3-VL-MoE's text decoder (Qwen3-VL-30B-A3B, 235B-A22B): Qwen3-VL's (M-RoPE,
// DeepStack) with Qwen3-MoE's routed experts in place of its dense FFN. Its router always
// renormalises the chosen weights (transformers' Qwen3VLMoeTextTopKRouter reads no
// norm_topk_prob; llama.cpp's qwen3vlmoe normalises too). An HF checkpoint holds each layer's
// experts as two fused tensors (model_spec.cpp).
#include "model/family.h"

namespace ts {

void configure_qwen3vlmoe(const ConfigView& v, ArchConfig& c) {
  configure_qwen3vl(v, c);
  read_qwen3moe_experts(v, c);
  c.norm_topk_prob = true;
}

}  // namespace ts

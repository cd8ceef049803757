// llama: Llama 2/3.x, Mistral and Mixtral (GGUF arch "llama" covers all of them).
#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_llama(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  // llama.cpp's converter permutes q/k rows to Meta's interleaved layout; HF keeps rotate-half.
  c.rope_pairing = v.is_gguf() ? RopePairing::Adjacent : RopePairing::NeoX;
  c.rotary_dim = v.opt_int("rope.dimension_count", nullptr).value_or(c.head_dim);
  if (!v.is_gguf()) {
    read_hf_rope_scaling(v, c, "rope_parameters");
    if (v.hf_value("sliding_window") != nullptr)
      v.invalid("sliding_window",
                "Mistral sliding-window attention is not wired for the llama family yet");
  }
  read_moe_common(v, c, "num_local_experts");
  if (c.n_expert > 0) {
    // Mixtral: softmax over the k selected logits, which is the renormalised top-k of the softmax.
    c.router = RouterScoring::TopkSoftmax;
    c.norm_topk_prob = true;
  }
}

}  // namespace ts

// gemma3: embeddings x sqrt(hidden), (1 + w) RMS norms, sandwich norms, GELU-tanh gated FFN,
// per-head q/k norm, interleaved sliding-window / global layers with their own rope bases.
#include <cmath>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_gemma3(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.sandwich_norms = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.ffn_act = FfnActivation::GeluTanh;
  c.qk_norm = QkNorm::PerHead;
  c.tied_embeddings = true;
  // HF stores w and computes x * (1 + w); llama.cpp's converter stores 1 + w.
  c.norm_plus_one = !v.is_gguf();
  c.sliding_window = v.req_int("attention.sliding_window", "sliding_window");
  c.attn_softcap = static_cast<float>(
      v.opt_float("attn_logit_softcapping", "attn_logit_softcapping").value_or(0));
  c.final_softcap = static_cast<float>(
      v.opt_float("final_logit_softcapping", "final_logit_softcapping").value_or(0));
  if (v.is_gguf()) {
    // The converter writes no pattern key; llama.cpp assumes Gemma 3's 5 local : 1 global.
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.layer_sliding[static_cast<size_t>(l)] = (l + 1) % 6 != 0;
    c.rope_theta_local =
        static_cast<float>(v.opt_float("rope.freq_base_swa", nullptr).value_or(10000.0));
    // The converter writes no query_pre_attn_scalar either. Google's configs set it to head_dim
    // but for the 27B (the one size of 62 layers), where it is n_embd / n_head: 168 against a
    // head_dim of 128, so 1/sqrt(head_dim) would sharpen every softmax. llama.cpp tells them apart
    // the same way.
    if (c.n_layer == 62 && c.n_head > 0) {
      const int64_t scalar = c.n_embd / c.n_head;  // 5376 / 32: whole
      c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
    }
    return;
  }
  read_hf_sliding_layers(v, c);
  auto theta = v.opt_float(nullptr, "rope_parameters/full_attention/rope_theta");
  auto local = v.opt_float(nullptr, "rope_parameters/sliding_attention/rope_theta");
  if (!theta) theta = v.opt_float(nullptr, "rope_theta");
  if (!local) local = v.opt_float(nullptr, "rope_local_base_freq");
  if (!theta || !local) v.missing(nullptr, "rope_parameters/{full,sliding}_attention/rope_theta");
  c.rope_theta = static_cast<float>(*theta);
  c.rope_theta_local = static_cast<float>(*local);
  read_hf_rope_scaling(v, c, "rope_parameters/full_attention");
  const double scalar =
      v.opt_float(nullptr, "query_pre_attn_scalar").value_or(static_cast<double>(c.head_dim));
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(scalar));
}

}  // namespace ts

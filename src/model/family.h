// ModelFamily: which family a source belongs to (from its declared architecture, never from its
// tensors) and the rules that fill an ArchConfig for it. One short file per family under
// families/ states only what differs from the common llama-style reading in read_common().
#pragma once

#include <string_view>

#include "model/arch_config.h"

namespace ts {

class ConfigView;
class ModelSource;

// Reads the fields every family shares (sizes, head counts, eps, rope theta, context) and sets
// the llama defaults for the rest; a family then overrides what differs.
void read_common(const ConfigView& v, ArchConfig& c);
// MoE fields shared by the MoE families (expert counts, expert FFN width, every layer MoE).
void read_moe_common(const ConfigView& v, ArchConfig& c, const char* hf_expert_count_key);
// HF `layer_types` ("sliding_attention" / "full_attention", one per layer): sets layer_sliding.
void read_hf_sliding_layers(const ConfigView& v, ArchConfig& c);
// HF `rope_parameters` (transformers 5) or legacy `rope_scaling`: sets the scaling fields.
void read_hf_rope_scaling(const ConfigView& v, ArchConfig& c, const char* params_path);
// GGUF's linear scaling keys, for every family (read_common). llama3 scaling is the rope_freqs
// tensor instead (model_spec.cpp); other types are refused.
void read_gguf_rope_scaling(const ConfigView& v, ArchConfig& c);

void configure_llama(const ConfigView& v, ArchConfig& c);
void configure_qwen2(const ConfigView& v, ArchConfig& c);
void configure_qwen3(const ConfigView& v, ArchConfig& c);
void configure_qwen3moe(const ConfigView& v, ArchConfig& c);
// Qwen3-MoE's routed experts (softmax top-k, which layers are sparse), shared with Qwen3-VL-MoE.
void read_qwen3moe_experts(const ConfigView& v, ArchConfig& c);
void configure_minimax_m2(const ConfigView& v, ArchConfig& c);
void configure_gemma3(const ConfigView& v, ArchConfig& c);
void configure_gemma4(const ConfigView& v, ArchConfig& c);  // dense and MoE
void configure_qwen3next(const ConfigView& v, ArchConfig& c);
void configure_qwen35(const ConfigView& v, ArchConfig& c);  // dense and MoE
void configure_gpt_oss(const ConfigView& v, ArchConfig& c);
void configure_deepseek2(const ConfigView& v, ArchConfig& c);
void configure_glm4moe(const ConfigView& v, ArchConfig& c);
// DeepSeek-V3's routed experts (GLM-4.5's too): sigmoid scores with a correction bias chosen
// within the best expert groups, routed_scaling_factor, shared experts, leading dense layers.
void read_deepseek_routing(const ConfigView& v, ArchConfig& c);
void configure_qwen3vl(const ConfigView& v, ArchConfig& c);
void configure_qwen3vlmoe(const ConfigView& v, ArchConfig& c);
void configure_bert(const ConfigView& v, ArchConfig& c);        // an encoder (LayerStack::Encoder)
void configure_nomic_bert(const ConfigView& v, ArchConfig& c);  // BERT's, rotary and SwiGLU

// YaRN's mscale (transformers' get_mscale): 0.1 * mscale * ln(factor) + 1, or 1 for factor <= 1.
float yarn_mscale(double factor, double mscale = 1.0);

// Identifies the family of `source` and fills an ArchConfig by its rules. Errors name the
// architecture string when it is unknown or a family we refuse (e.g. qwen3next).
ArchConfig read_arch_config(const ModelSource& source);

// Whether `hf_class` is a multimodal checkpoint (`...ForConditionalGeneration`) that a family
// reads as its text decoder: ModelSource then presents that decoder (its text_config, the text
// model's tensor names).
bool is_multimodal_class(std::string_view hf_class);

}  // namespace ts

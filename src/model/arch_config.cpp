#include "model/arch_config.h"

#include <algorithm>

namespace ts {

const char* family_name(Family f) {
  switch (f) {
    case Family::Llama:
      return "llama";
    case Family::Qwen2:
      return "qwen2";
    case Family::Qwen3:
      return "qwen3";
    case Family::Qwen3Moe:
      return "qwen3moe";
    case Family::MiniMaxM2:
      return "minimax-m2";
    case Family::Gemma3:
      return "gemma3";
    case Family::Qwen3Next:
      return "qwen3next";
    case Family::Qwen35:
      return "qwen35";
    case Family::Qwen35Moe:
      return "qwen35moe";
    case Family::DeepSeek2:
      return "deepseek2";
    case Family::GptOss:
      return "gpt-oss";
    case Family::Qwen3VL:
      return "qwen3vl";
    case Family::Qwen3VLMoe:
      return "qwen3vlmoe";
    case Family::Gemma4:
      return "gemma4";
    case Family::Glm4Moe:
      return "glm4moe";
    case Family::Bert:
      return "bert";
    case Family::NomicBert:
      return "nomic-bert";
  }
  return "?";
}

const char* mixer_name(MixerKind m) {
  switch (m) {
    case MixerKind::Attention:
      return "attention";
    case MixerKind::DeltaNet:
      return "deltanet";
    case MixerKind::Mla:
      return "mla";
  }
  return "?";
}

bool ArchConfig::has_mixer(MixerKind m) const {
  for (MixerKind k : layer_mixer)
    if (k == m) return true;
  return false;
}

int64_t ArchConfig::attention_layers() const {
  int64_t n = 0;
  for (MixerKind k : layer_mixer) n += k == MixerKind::Attention ? 1 : 0;
  return n;
}

int64_t ArchConfig::max_q_width() const {
  int64_t w = n_head * head_dim;
  for (int64_t h : layer_head_dim) w = std::max(w, n_head * h);
  return w;
}

int64_t ArchConfig::max_kv_width() const {
  int64_t w = n_head_kv * head_dim;
  for (size_t l = 0; l < layer_head_dim.size(); ++l)
    w = std::max(w, n_head_kv_of(static_cast<int64_t>(l)) * layer_head_dim[l]);
  return w;
}

const char* qk_norm_name(QkNorm q) {
  switch (q) {
    case QkNorm::None:
      return "none";
    case QkNorm::PerHead:
      return "per-head";
    case QkNorm::WholeProjection:
      return "whole-projection";
  }
  return "?";
}

const char* rope_scaling_name(RopeScaling r) {
  switch (r) {
    case RopeScaling::None:
      return "none";
    case RopeScaling::Linear:
      return "linear";
    case RopeScaling::Llama3:
      return "llama3";
    case RopeScaling::Yarn:
      return "yarn";
  }
  return "?";
}

}  // namespace ts

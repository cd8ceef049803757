#include "model/arch_config.h"

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
  }
  return "?";
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

const char* router_scoring_name(RouterScoring r) {
  switch (r) {
    case RouterScoring::None:
      return "none";
    case RouterScoring::TopkSoftmax:
      return "topk-softmax";
    case RouterScoring::SoftmaxTopk:
      return "softmax-topk";
    case RouterScoring::SigmoidBiasTopk:
      return "sigmoid-bias-topk";
  }
  return "?";
}

}  // namespace ts

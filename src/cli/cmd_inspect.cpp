// `turbospark inspect MODEL [--json] [--expert-slots N] [-c CTX]`: what a model is and what it
// will cost in memory, without running it (an encoder: what serving it with --parallel 1 takes).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/number_checks.h"
#include "cli/serve_memory.h"
#include "core/error.h"
#include "model/family.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "runtime/encoder.h"
#include "runtime/footprint.h"

namespace ts::cli {
namespace {

nlohmann::json arch_json(const ArchConfig& c) {
  nlohmann::json j;
  j["family"] = family_name(c.family);
  j["source"] = c.source == SourceKind::Gguf ? "gguf" : "hf";
  j["n_vocab"] = c.n_vocab;
  j["n_embd"] = c.n_embd;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_head_kv"] = c.n_head_kv;
  j["head_dim"] = c.head_dim;
  j["n_ff"] = c.n_ff;
  j["n_ff_expert"] = c.n_ff_expert;
  j["n_expert"] = c.n_expert;
  j["n_expert_used"] = c.n_expert_used;
  j["ctx_train"] = c.ctx_train;
  j["rms_eps"] = c.rms_eps;
  j["norm_plus_one"] = c.norm_plus_one;
  j["sandwich_norms"] = c.sandwich_norms;
  j["embed_scale"] = c.embed_scale;
  j["ffn_act"] = c.ffn_act == FfnActivation::SiLU       ? "silu"
                 : c.ffn_act == FfnActivation::GeluTanh ? "gelu_tanh"
                                                        : "swiglu_clamped";
  j["qkv_bias"] = c.qkv_bias;
  j["qk_norm"] = qk_norm_name(c.qk_norm);
  j["attn_scale"] = c.attn_scale;
  j["attn_softcap"] = c.attn_softcap;
  j["final_softcap"] = c.final_softcap;
  j["rope_theta"] = c.rope_theta;
  j["rope_theta_local"] = c.rope_theta_local;
  j["rotary_dim"] = c.rotary_dim;
  j["rope_pairing"] = c.rope_pairing == RopePairing::NeoX ? "neox" : "adjacent";
  j["rope_scaling"] = rope_scaling_name(c.rope_scaling);
  j["rope_factor"] = c.rope_factor;
  j["rope_low_freq_factor"] = c.rope_low_freq_factor;
  j["rope_high_freq_factor"] = c.rope_high_freq_factor;
  j["rope_orig_ctx"] = c.rope_orig_ctx;
  if (c.rope_scaling == RopeScaling::Yarn) {
    j["rope_beta_fast"] = c.rope_beta_fast;
    j["rope_beta_slow"] = c.rope_beta_slow;
    j["rope_yarn_truncate"] = c.rope_yarn_truncate;
    j["rope_attn_factor"] = c.rope_attn_factor;
  }
  j["rope_freqs_tensor"] = c.rope_freqs_tensor;
  j["sliding_window"] = c.sliding_window;
  j["layer_sliding"] = c.layer_sliding;
  j["layer_moe"] = c.layer_moe;
  nlohmann::json mixers = nlohmann::json::array();
  for (MixerKind m : c.layer_mixer) mixers.push_back(mixer_name(m));
  j["layer_mixer"] = mixers;
  j["attn_output_gate"] = c.attn_output_gate;
  if (c.has_mixer(MixerKind::DeltaNet)) {
    const DeltaNetConfig& d = c.delta;
    j["deltanet"] = {{"n_k_heads", d.n_k_heads},     {"n_v_heads", d.n_v_heads},
                     {"k_head_dim", d.k_head_dim},   {"v_head_dim", d.v_head_dim},
                     {"conv_kernel", d.conv_kernel}, {"v_heads_tiled", d.v_heads_tiled}};
  }
  if (c.has_mixer(MixerKind::Mla)) {
    const MlaConfig& m = c.mla;
    j["mla"] = {{"q_lora_rank", m.q_lora_rank},
                {"kv_lora_rank", m.kv_lora_rank},
                {"qk_nope_head_dim", m.qk_nope_head_dim},
                {"qk_rope_head_dim", m.qk_rope_head_dim},
                {"v_head_dim", m.v_head_dim},
                {"cache_row", m.row_width()}};
  }
  if (c.router == RouterScoring::SigmoidGroupTopk) {
    j["n_group"] = c.n_group;
    j["topk_group"] = c.topk_group;
  }
  if (c.routed_scale != 1.0f) j["routed_scale"] = c.routed_scale;
  if (c.yarn_score_factor != 1.0f) j["yarn_score_factor"] = c.yarn_score_factor;
  j["n_ff_shared"] = c.n_ff_shared;
  j["shared_expert_gate"] = c.shared_expert_gate;
  j["router"] = router_scoring_name(c.router);
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["router_bias"] = c.router_bias;
  j["tied_embeddings"] = c.tied_embeddings;
  if (c.family == Family::Gemma4) {
    j["layer_head_dim"] = c.layer_head_dim;
    j["layer_n_head_kv"] = c.layer_n_head_kv;
    j["layer_n_ff"] = c.layer_n_ff;
    j["layer_kv_source"] = c.layer_kv_source;
    j["rope_partial_global"] = c.rope_partial_global;
    j["attn_v_norm"] = c.attn_v_norm;
    j["attn_k_eq_v"] = c.attn_k_eq_v;
    j["n_embd_per_layer"] = c.n_embd_per_layer;
    j["layer_output_scale"] = c.layer_output_scale;
    j["moe_dense_beside"] = c.moe_dense_beside;
  }
  return j;
}

struct InspectArgs {
  std::string model;
  bool json = false;
  int64_t slots = 0;
  int64_t ctx = 4096;
};

// An encoder's configuration (EncoderConfig beside the sizes), its weights and what serving it
// takes with --parallel 1: the weights and a pass of one text of its positions.
int inspect_encoder(const InspectArgs& a) {
  const auto encoder = Encoder::open(a.model, "cpu", 1);
  const ArchConfig& c = encoder->cfg();
  const EncoderConfig& e = c.encoder;
  std::map<std::string, int64_t> by_dtype;
  for (const TensorRef& t : encoder->source().all_tensors()) by_dtype[dtype_name(t.dtype)]++;
  nlohmann::json arch = {
      {"n_layer", c.n_layer},
      {"n_embd", c.n_embd},
      {"n_head", c.n_head},
      {"head_dim", c.head_dim},
      {"n_ff", c.n_ff},
      {"n_vocab", c.n_vocab},
      {"n_positions", e.n_positions},
      {"norm_eps", e.norm_eps},
      {"positions", e.positions == EncoderPositions::Rotary ? "rotary" : "learned"},
      {"ffn", e.ffn == EncoderFfn::SwiGlu ? "swiglu" : "gelu"},
      {"biases", e.biases}};
  if (e.positions == EncoderPositions::Rotary) arch["rope_theta"] = c.rope_theta;
  if (e.ffn == EncoderFfn::Gelu) arch["gelu_tanh"] = e.gelu_tanh;
  const EncoderServeMemory m = encoder_serve_memory(*encoder, e.n_positions, 0);
  if (a.json) {
    const nlohmann::json j = {{"path", encoder->source().path()},
                              {"family", family_name(c.family)},
                              {"stack", "encoder"},
                              {"arch", arch},
                              {"tensor_count_by_dtype", by_dtype},
                              {"footprint",
                               {{"weight_bytes", m.weights},
                                {"pass_rows", m.rows},
                                {"pass_bytes", m.pass},
                                {"total_bytes", m.total}}}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model      %s\n", encoder->source().path().c_str());
  std::printf("family     %s (%s), an encoder: embeddings only\n", family_name(c.family),
              c.source == SourceKind::Gguf ? "GGUF" : "HF");
  for (auto& [k, v] : arch.items()) std::printf("  %-22s %s\n", k.c_str(), v.dump().c_str());
  std::printf("tensors   ");
  for (auto& [k, v] : by_dtype) std::printf(" %s:%lld", k.c_str(), static_cast<long long>(v));
  std::printf("\n");
  print_encoder_serve_memory(m, stdout);
  return 0;
}

int run_inspect(const InspectArgs& a) {
  if (a.model.empty()) fail(ErrorKind::Usage, "inspect: no model given");
  if (is_encoder_model(a.model)) return inspect_encoder(a);
  const auto spec = open_model_spec(a.model);
  const ArchConfig& c = spec->cfg;
  std::map<std::string, int64_t> by_dtype;
  for (const TensorRef& t : spec->source->all_tensors()) by_dtype[dtype_name(t.dtype)]++;
  FootprintRequest req;
  req.ctx = a.ctx;
  req.prefill_batch = default_prefill_batch(c, true, a.ctx);
  req.expert_slots = a.slots;
  // The footprint of a run on the CPU backend (its scratch: the attention's kept split states).
  const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
  req.backend = cpu.get();
  const Footprint fp = compute_footprint(*spec, req);

  nlohmann::json j;
  j["path"] = spec->source->path();
  j["arch"] = arch_json(c);
  j["tensor_count_by_dtype"] = by_dtype;
  j["resident_bytes"] = spec->resident_bytes;
  j["mapped_bytes"] = spec->mapped_bytes;
  j["routed_expert_bytes"] = spec->routed_expert_bytes;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerIndex& L : spec->layers) {
    nlohmann::json l;
    l["moe"] = !L.experts.empty();
    l["n_expert"] = L.experts.size();
    l["expert_stride"] = L.expert_stride();
    layers.push_back(l);
  }
  j["layers"] = layers;
  j["footprint"] = footprint_json(fp);
  // What one sequence holds besides its weights' share: KV rows for the context, and the
  // recurrent state (one copy; the footprint counts its checkpoints too).
  j["per_sequence"] = {{"kv_cache_bytes", fp.kv_cache},
                       {"kv_bytes_per_token", kv_bytes_per_token(c, req.kv_type)},
                       {"recurrent_state_bytes", recurrent_state_bytes(c)},
                       {"state_checkpoints", req.state_checkpoints}};
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model      %s\n", spec->source->path().c_str());
  std::printf("family     %s (%s)\n", family_name(c.family),
              c.source == SourceKind::Gguf ? "GGUF" : "HF");
  for (auto& [k, v] : j["arch"].items())
    if (k != "family" && k != "source") std::printf("  %-22s %s\n", k.c_str(), v.dump().c_str());
  std::printf("tensors   ");
  for (auto& [k, v] : by_dtype) std::printf(" %s:%lld", k.c_str(), static_cast<long long>(v));
  std::printf("\nresident   %.2f MiB\n", static_cast<double>(spec->resident_bytes) / (1 << 20));
  if (c.is_moe())
    std::printf("experts    %lld per MoE layer, stride %.2f MiB, all routed experts %.2f MiB\n",
                static_cast<long long>(c.n_expert),
                static_cast<double>(spec->expert_stride) / (1 << 20),
                static_cast<double>(spec->routed_expert_bytes) / (1 << 20));
  std::printf("layers     ");
  for (MixerKind m : c.layer_mixer)
    std::printf("%c", m == MixerKind::DeltaNet ? 'D' : m == MixerKind::Mla ? 'M' : 'A');
  std::printf("  (A attention, D Gated DeltaNet, M latent attention)\n");
  if (!c.layer_kv_source.empty()) {
    // Which layers hold KV rows, and whose rows the others read (Gemma 4's KV sharing).
    std::printf("kv rows   ");
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.holds_kv(l))
        std::printf(" own");
      else
        std::printf(" <%lld", static_cast<long long>(c.kv_source_of(l)));
    }
    std::printf("\n");
  }
  std::printf(
      "sequence   KV %.2f MiB for %lld tokens (%llu bytes a token, %s) + recurrent state "
      "%.2f MiB (x%lld with its checkpoints)\n",
      static_cast<double>(fp.kv_cache) / (1 << 20), static_cast<long long>(a.ctx),
      static_cast<unsigned long long>(kv_bytes_per_token(c, req.kv_type)), dtype_name(req.kv_type),
      static_cast<double>(recurrent_state_bytes(c)) / (1 << 20),
      static_cast<long long>(1 + req.state_checkpoints));
  print_footprint(fp, stdout);
  return 0;
}

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto* sub =
      app.add_subcommand("inspect", "Show a model's family, configuration, tensors and footprint");
  auto a = std::make_shared<InspectArgs>();
  sub->add_option("model", a->model, "GGUF file or Hugging Face directory");
  sub->add_option("-m,--model", a->model,
                  "GGUF file or Hugging Face directory (same as the positional)");
  sub->add_flag("--json", a->json, "Print one JSON object");
  sub->add_option("--expert-slots", a->slots,
                  "Expert slots per MoE layer for the footprint (0 = resident)")
      ->check(at_least(0));
  sub->add_option("-c,--ctx-size", a->ctx, "Context length for the KV-cache footprint")
      ->check(at_least(1));
  return [a] { return run_inspect(*a); };
}

}  // namespace ts::cli

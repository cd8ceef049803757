// minimax-m2: sigmoid router whose correction bias only selects experts; partial rotary; q/k RMS
// norm over the whole projection (before the heads are split); untied head.
#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_minimax_m2(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qk_norm = QkNorm::WholeProjection;
  read_moe_common(v, c, "num_local_experts");
  c.router = RouterScoring::SigmoidBiasTopk;
  c.router_bias = true;
  c.norm_topk_prob = true;
  if (v.is_gguf()) {
    c.rotary_dim = v.req_int("rope.dimension_count", nullptr);
    const int64_t gating = v.req_int("expert_gating_func", nullptr);
    if (gating != 2)
      v.invalid("expert_gating_func",
                std::to_string(gating) + " (only 2 = sigmoid is MiniMax-M2's)");
  } else {
    read_hf_rope_scaling(v, c, "rope_parameters");
    c.rotary_dim = v.req_int(nullptr, "rotary_dim");
    const auto scoring = v.opt_string(nullptr, "scoring_func");
    if (!scoring || *scoring != "sigmoid")
      v.invalid("scoring_func", "MiniMax-M2 requires \"sigmoid\"");
    if (v.opt_bool(nullptr, "use_routing_bias") == false)
      v.invalid("use_routing_bias", "MiniMax-M2 without the routing bias is not supported");
  }
}

}  // namespace ts

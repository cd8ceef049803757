// qwen3: llama with a per-head RMS norm on q and k before RoPE.
#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_qwen3(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qk_norm = QkNorm::PerHead;
  if (!v.is_gguf()) {
    read_hf_rope_scaling(v, c, "rope_parameters");
    if (v.opt_bool(nullptr, "use_sliding_window").value_or(false))
      v.invalid("use_sliding_window", "Qwen3 sliding-window layers are not supported");
  }
}

}  // namespace ts

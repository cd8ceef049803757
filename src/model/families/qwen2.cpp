// qwen2: llama with learned biases on q, k and v.
#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_qwen2(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qkv_bias = true;
  if (!v.is_gguf()) {
    read_hf_rope_scaling(v, c, "rope_parameters");
    if (v.opt_bool(nullptr, "use_sliding_window").value_or(false))
      v.invalid("use_sliding_window", "Qwen2 sliding-window layers are not supported");
  }
}

}  // namespace ts

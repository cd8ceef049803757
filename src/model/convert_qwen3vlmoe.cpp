// Qwen3VLMoeTextModel's experts: each layer's two whole tensors as the released checkpoints store
// them, transposed ([E][hidden][2 ff]: gate columns, then up columns; [E][ff][hidden]), split and
// transposed into the stacked gate, up and down tensors as the converter does. The converter reads
// no other layout (transformers' own save, [E][2 ff][hidden], it would misread): refused by name.
#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/tensor_names.h"

namespace ts {

bool qwen3vlmoe_tensor(const TensorRef& t, int64_t l, const Hparams& hp, const ModelSource& src,
                       std::vector<ConvertTensor>& out) {
  const bool gate_up = t.name.ends_with("mlp.experts.gate_up_proj");
  if (!gate_up && !t.name.ends_with("mlp.experts.down_proj")) return false;
  const auto d = static_cast<uint64_t>(hp.req_int("hidden_size"));
  const auto ff = static_cast<uint64_t>(hp.req_int("moe_intermediate_size"));
  // GGML order: [columns, rows, E] of the transposed matrices.
  const uint64_t width = gate_up ? 2 * ff : d, in = gate_up ? d : ff;
  if (t.dims.size() != 3 || t.dims[0] != width || t.dims[1] != in)
    fail(ErrorKind::Unsupported,
         src.path() + ": tensor '" + t.name + "' has shape " + t.shape_string() + ", not [" +
             std::to_string(width) + ", " + std::to_string(in) +
             ", E] (GGML order) as the released checkpoints store it, the one layout "
             "llama.cpp's converter reads (transformers' own save is read by run, not convert)");
  const auto name = [&](LayerTensor r) { return gguf_name(Family::Qwen3VLMoe, r, l); };
  if (gate_up) {
    out.push_back(transposed_experts(t, name(LayerTensor::ExpGate), 0, 1, ff));
    out.push_back(transposed_experts(t, name(LayerTensor::ExpUp), static_cast<int64_t>(ff), 1, ff));
  } else {
    out.push_back(transposed_experts(t, name(LayerTensor::ExpDown), 0, 1, d));
  }
  return true;
}

}  // namespace ts

// GptOssModel's experts: each layer's are whole tensors in the checkpoint, gate and up interleaved
// by row (even rows gate), either f32 and stored transposed ([E][in][out]) or MXFP4 planes and
// scales, which the converter repacks into GGUF's MXFP4 blocks and keeps MXFP4 whatever the type.
#include <memory>

#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/tensor_names.h"
#include "quant/blocks.h"
#include "quant/mxfp4_planes.h"

namespace ts {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Element first + r * step of each row of the bias [E][width]: dims [rows, E].
ConvertTensor strided_bias(const TensorRef& t, const std::string& name, int64_t first,
                           int64_t step) {
  const uint64_t width = t.dims[0], experts = t.dims[1];
  const uint64_t rows = width / static_cast<uint64_t>(step);
  ConvertTensor c{name, {rows, experts}, true, nullptr};
  c.values = [t, width, experts, rows, first, step](float* v) {
    std::vector<float> src(width * experts);
    read_f32(t, src.data());
    for (uint64_t e = 0; e < experts; ++e)
      for (uint64_t r = 0; r < rows; ++r)
        v[e * rows + r] =
            src[e * width + static_cast<uint64_t>(first) + r * static_cast<uint64_t>(step)];
  };
  return c;
}

// Rows first + r * step of every expert's planes [E][rows][blocks][16] and scales
// [E][rows][blocks].
ConvertTensor mxfp4(const TensorRef& planes, const TensorRef& scales, const std::string& name,
                    int64_t first, int64_t step) {
  const uint64_t blocks = planes.dims[1], src_rows = planes.dims[2], experts = planes.dims[3];
  const uint64_t rows = src_rows / static_cast<uint64_t>(step);
  ConvertTensor c{name, {blocks * 32, rows, experts}, false, nullptr};
  c.raw_dtype = DType::MXFP4;
  c.raw_bytes = [planes, scales, blocks, src_rows, experts, rows, first, step](uint8_t* out) {
    for (uint64_t e = 0; e < experts; ++e)
      mxfp4_planes_to_blocks(planes.data() + e * src_rows * blocks * 16,
                             scales.data() + e * src_rows * blocks, static_cast<int64_t>(rows),
                             static_cast<int64_t>(blocks), first, step,
                             out + e * rows * blocks * sizeof(BlockMXFP4));
  };
  return c;
}

}  // namespace

bool gpt_oss_tensor(const TensorRef& t, int64_t l, const Hparams&, const ModelSource& src,
                    std::vector<ConvertTensor>& out) {
  const std::string& n = t.name;
  const auto name = [&](LayerTensor r) { return gguf_name(Family::GptOss, r, l); };
  if (ends_with(n, "mlp.experts.gate_up_proj")) {
    out.push_back(transposed_experts(t, name(LayerTensor::ExpGate), 0, 2, t.dims[0] / 2));
    out.push_back(transposed_experts(t, name(LayerTensor::ExpUp), 1, 2, t.dims[0] / 2));
  } else if (ends_with(n, "mlp.experts.down_proj")) {
    out.push_back(transposed_experts(t, name(LayerTensor::ExpDown), 0, 1, t.dims[0]));
  } else if (ends_with(n, "mlp.experts.gate_up_proj_bias")) {
    out.push_back(strided_bias(t, name(LayerTensor::ExpGateBias), 0, 2));
    out.push_back(strided_bias(t, name(LayerTensor::ExpUpBias), 1, 2));
  } else if (ends_with(n, "mlp.experts.down_proj_bias")) {
    out.push_back(strided_bias(t, name(LayerTensor::ExpDownBias), 0, 1));
  } else if (ends_with(n, "_blocks")) {
    const std::string base = n.substr(0, n.size() - 7);
    const auto scales = src.find(base + "_scales");
    if (!scales) return false;  // refused as a tensor without a GGUF name
    if (ends_with(base, "gate_up_proj")) {
      out.push_back(mxfp4(t, *scales, name(LayerTensor::ExpGate), 0, 2));
      out.push_back(mxfp4(t, *scales, name(LayerTensor::ExpUp), 1, 2));
    } else {
      out.push_back(mxfp4(t, *scales, name(LayerTensor::ExpDown), 0, 1));
    }
  } else {
    // Scales are read with their planes.
    return ends_with(n, "_scales") && src.find(n.substr(0, n.size() - 7) + "_blocks").has_value();
  }
  return true;
}

}  // namespace ts

// Qwen3NextModel: the Gated DeltaNet sizes and which layers are recurrent, and its tensors:
// in_proj_qkvz cut per key head into attn_qkv (every head's q, then k, then v) and attn_gate (z),
// A_log stored as -exp(A_log), the convolution taps squeezed, (1 + w) norms but the DeltaNet's;
// the MTP block left out (the converter's --no-mtp).
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/tensor_names.h"

namespace ts {

using nlohmann::json;

void qwen3next_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  qwen2moe_keys(hp, source, w);
  w.u32("ssm.conv_kernel", hp.req_int("linear_conv_kernel_dim"));
  w.u32("ssm.state_size", hp.req_int("linear_key_head_dim"));
  w.u32("ssm.group_count", hp.req_int("linear_num_key_heads"));
  w.u32("ssm.time_step_rank", hp.req_int("linear_num_value_heads"));
  w.u32("ssm.inner_size",
        hp.req_int("linear_value_head_dim") * hp.req_int("linear_num_value_heads"));
  if (const json* types = hp.get("layer_types"); types != nullptr && types->is_array()) {
    if (static_cast<int64_t>(types->size()) != hp.req_int("num_hidden_layers"))
      fail(ErrorKind::Model, hp.where() + ": layer_types has " + std::to_string(types->size()) +
                                 " entries, not one per layer");
    std::vector<int64_t> recurrent;
    for (const json& t : *types) recurrent.push_back(t == "linear_attention" ? 1 : 0);
    w.bool_array("attention.recurrent_layers", recurrent);
  }
  const json* interval = hp.get("full_attention_interval");
  w.u32("full_attention_interval", interval != nullptr ? interval->get<int64_t>() : 4);
  const json* hd = hp.get("head_dim");
  const int64_t head_dim = hd != nullptr
                               ? hd->get<int64_t>()
                               : hp.req_int("hidden_size") / hp.req_int("num_attention_heads");
  const auto partial = hp.rope().find("partial_rotary_factor");
  const double factor =
      partial != hp.rope().end() && partial->is_number() ? partial->get<double>() : 0.25;
  w.u32("rope.dimension_count", static_cast<int64_t>(static_cast<double>(head_dim) * factor));
}

bool qwen3next_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource&,
                      std::vector<ConvertTensor>& out) {
  const auto name = [&](LayerTensor r) { return gguf_name(Family::Qwen3Next, r, layer); };
  // The MTP block is left out, as the converter's --no-mtp leaves it (nor is it run here).
  if (t.name.starts_with("mtp.") || t.name.starts_with("model.mtp.")) return true;
  if (t.name.ends_with(".linear_attn.A_log")) {
    out.emplace_back(name(LayerTensor::DnA), t.dims, true, [t](float* v) {
      read_f32(t, v);
      for (uint64_t i = 0; i < t.dims[0]; ++i) v[i] = -std::exp(v[i]);
    });
    return true;
  }
  if (t.name.ends_with(".linear_attn.conv1d.weight")) {
    // [channels][1][kernel] squeezed to [channels][kernel].
    out.emplace_back(name(LayerTensor::DnConv), std::vector<uint64_t>{t.dims[0], t.dims[2]}, true,
                     [t](float* v) { read_f32(t, v); });
    return true;
  }
  if (!t.name.ends_with(".linear_attn.in_proj_qkvz.weight")) return false;
  const int64_t hk = hp.req_int("linear_key_head_dim"), hv = hp.req_int("linear_value_head_dim");
  const int64_t nk = hp.req_int("linear_num_key_heads"), nv = hp.req_int("linear_num_value_heads");
  const int64_t cols = static_cast<int64_t>(t.dims[0]);
  const int64_t vper = nv / nk * hv, per_head = 2 * hk + 2 * vper;
  if (static_cast<int64_t>(t.dims[1]) != nk * per_head)
    fail(ErrorKind::Model,
         "tensor '" + t.name + "' has shape " + t.shape_string() +
             ", not [hidden, key heads x (2 key dims + 2 x value dims per key head)]");
  // Rows [first, first + n) of every key head's group, head after head.
  const auto rows_of = [=](float* v, const float* src, int64_t first, int64_t n) {
    for (int64_t h = 0; h < nk; ++h)
      for (int64_t i = 0; i < n; ++i)
        std::copy(src + (h * per_head + first + i) * cols,
                  src + (h * per_head + first + i + 1) * cols, v + (h * n + i) * cols);
  };
  const auto ucols = static_cast<uint64_t>(cols);
  out.emplace_back(name(LayerTensor::DnQkv),
                   std::vector<uint64_t>{ucols, static_cast<uint64_t>(nk * (2 * hk + vper))}, false,
                   [=](float* v) {
                     std::vector<float> src(t.dims[0] * t.dims[1]);
                     read_f32(t, src.data());
                     rows_of(v, src.data(), 0, hk);
                     rows_of(v + nk * hk * cols, src.data(), hk, hk);
                     rows_of(v + 2 * nk * hk * cols, src.data(), 2 * hk, vper);
                   });
  out.emplace_back(name(LayerTensor::DnZ),
                   std::vector<uint64_t>{ucols, static_cast<uint64_t>(nk * vper)}, false,
                   [=](float* v) {
                     std::vector<float> src(t.dims[0] * t.dims[1]);
                     read_f32(t, src.data());
                     rows_of(v, src.data(), 2 * hk + vper, vper);
                   });
  return true;
}

namespace {

// Qwen3.5 keeps value heads grouped by key head ([k][r][dim]); the converter tiles them
// ([r][k][dim]) so that ggml broadcasts key heads over value heads: element (j, k, d) of the
// result is (k, j, d) of the source, over `n` = nk * r * dim consecutive rows (or columns).
int64_t tiled(int64_t i, int64_t nk, int64_t r, int64_t dim) {
  const int64_t d = i % dim, head = i / dim, j = head / nk, k = head % nk;
  return (k * r + j) * dim + d;
}

struct VHeads {
  int64_t nk, r, hk, hv;
};

// Rows [first, first + nk * r * dim) of a [rows][cols] matrix reordered; the others as they are.
void tile_rows(const TensorRef& t, float* v, int64_t first, const VHeads& h, int64_t dim) {
  const int64_t cols = t.dims.size() > 1 ? static_cast<int64_t>(t.dims[0]) : 1;
  const int64_t rows = t.cols() * t.rows() / cols;
  std::vector<float> src(static_cast<size_t>(rows * cols));
  read_f32(t, src.data());
  std::copy(src.begin(), src.end(), v);
  const int64_t n = h.nk * h.r * dim;
  for (int64_t i = 0; i < n; ++i)
    std::copy(src.begin() + (first + tiled(i, h.nk, h.r, dim)) * cols,
              src.begin() + (first + tiled(i, h.nk, h.r, dim) + 1) * cols, v + (first + i) * cols);
}

}  // namespace

void qwen35_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  qwen3next_keys(hp, source, w);
  if (!hp.rope().contains("mrope_section")) w.i32_array("rope.dimension_sections", {11, 11, 10, 0});
}

bool qwen35_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource&,
                   std::vector<ConvertTensor>& out) {
  if (t.name.starts_with("mtp.") || t.name.starts_with("model.mtp.")) return true;
  if (t.name.find(".linear_attn.") == std::string::npos) return false;
  // Qwen3.5's dense and MoE files name the DeltaNet tensors alike.
  const auto name = [&](LayerTensor r) { return gguf_name(Family::Qwen35, r, layer); };
  const int64_t nk = hp.req_int("linear_num_key_heads"), nv = hp.req_int("linear_num_value_heads");
  const VHeads h{nk, nv / nk, hp.req_int("linear_key_head_dim"),
                 hp.req_int("linear_value_head_dim")};
  const auto rows = [&](LayerTensor role, std::vector<uint64_t> dims, int64_t first, int64_t dim,
                        bool keep_f32, bool negate_exp) {
    out.emplace_back(name(role), std::move(dims), keep_f32,
                     [t, h, first, dim, negate_exp](float* v) {
                       tile_rows(t, v, first, h, dim);
                       if (negate_exp)
                         for (uint64_t i = 0; i < static_cast<uint64_t>(t.cols() * t.rows()); ++i)
                           v[i] = -std::exp(v[i]);
                     });
    return true;
  };
  const std::string& n = t.name;
  if (n.ends_with(".in_proj_qkv.weight"))
    return rows(LayerTensor::DnQkv, t.dims, 2 * h.nk * h.hk, h.hv, false, false);
  if (n.ends_with(".in_proj_z.weight"))
    return rows(LayerTensor::DnZ, t.dims, 0, h.hv, false, false);
  if (n.ends_with(".in_proj_b.weight"))
    return rows(LayerTensor::DnBeta, t.dims, 0, 1, false, false);
  if (n.ends_with(".in_proj_a.weight"))
    return rows(LayerTensor::DnAlpha, t.dims, 0, 1, false, false);
  if (n.ends_with(".A_log")) return rows(LayerTensor::DnA, t.dims, 0, 1, true, true);
  if (n.ends_with(".dt_bias")) return rows(LayerTensor::DnDtBias, t.dims, 0, 1, true, false);
  if (n.ends_with(".conv1d.weight"))  // [channels][1][kernel] squeezed; the v channels tiled
    return rows(LayerTensor::DnConv, {t.dims[0], t.dims[2]}, 2 * h.nk * h.hk, h.hv, true, false);
  if (n.ends_with(".out_proj.weight")) {
    // The v heads are its columns: each row tiled.
    out.emplace_back(name(LayerTensor::DnOut), t.dims, false, [t, h](float* v) {
      const auto cols = static_cast<int64_t>(t.dims[0]), rows_n = static_cast<int64_t>(t.dims[1]);
      std::vector<float> src(static_cast<size_t>(t.cols() * t.rows()));
      read_f32(t, src.data());
      for (int64_t r = 0; r < rows_n; ++r)
        for (int64_t c = 0; c < cols; ++c)
          v[r * cols + c] = src[static_cast<size_t>(r * cols + tiled(c, h.nk, h.r, h.hv))];
    });
    return true;
  }
  return false;  // the gated norm: renamed as it is
}

}  // namespace ts

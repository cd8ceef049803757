// The tensors of `convert`: every tensor of the HF directory under its GGUF name (the roles of
// tensor_names.h), the routed experts of a layer stacked into one [cols, rows, n_expert] tensor,
// and what the family's class does to the values (convert_family.h, ConvertFix).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/tensor_names.h"
#include "quant/dequant.h"

namespace ts {
namespace {

using nlohmann::json;

uint64_t count(const std::vector<uint64_t>& dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

// llama's q/k rows: per head, the converter reorders rotate-half pairs (i, i + hd/2) into
// interleaved ones (2i, 2i + 1): row h*hd + 2i + j takes row h*hd + j*hd/2 + i.
void permute_rows(float* v, int64_t rows, int64_t cols, int64_t n_head) {
  const int64_t hd = rows / n_head, half = hd / 2;
  std::vector<float> src(v, v + rows * cols);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(v + (h * hd + 2 * i + j) * cols, src.data() + (h * hd + j * half + i) * cols,
                    static_cast<size_t>(cols) * sizeof(float));
}

// The divisors of llama3 rope scaling per frequency, in float32 as the converter's torch
// arithmetic computes them.
std::vector<float> llama3_freq_divisors(const json& r, int64_t dim) {
  const auto num = [&](const char* key, double fallback) {
    auto it = r.find(key);
    return it != r.end() && it->is_number() ? it->get<double>() : fallback;
  };
  const float base = static_cast<float>(num("rope_theta", 10000.0));
  const float factor = static_cast<float>(num("factor", 8.0));
  const float low = static_cast<float>(num("low_freq_factor", 1.0));
  const float high = static_cast<float>(num("high_freq_factor", 4.0));
  const float old_ctx = static_cast<float>(num("original_max_position_embeddings", 8192));
  const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  const float two_pi = static_cast<float>(2 * M_PI);
  const float span = static_cast<float>(num("high_freq_factor", 4.0) - num("low_freq_factor", 1.0));
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = two_pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - low) / span;
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The converter's TextModel skips these (a multimodal checkpoint's other towers, rotary caches).
bool skipped_by_converter(const std::string& name) {
  for (const char* part : {"visual.", "vision", "audio", "multi_modal_projector", "mm_projector",
                           "patch_embed", "image_newline"})
    if (name.find(part) != std::string::npos) return true;
  return ends_with(name, ".rotary_emb.inv_freq") || ends_with(name, ".attention.masked_bias");
}

// The layer a tensor name belongs to ("model.layers.3.mlp..." -> 3), -1 for none.
int64_t layer_of(const std::string& name) {
  const size_t at = name.find("layers.");
  if (at == std::string::npos) return -1;
  return std::strtoll(name.c_str() + at + 7, nullptr, 10);
}

struct ExpertSlot {
  int64_t layer;
  int64_t expert;
  LayerTensor role;
};

class TensorPlan {
 public:
  TensorPlan(const ConvertFamily& f, const Hparams& hp, const ModelSource& src, int64_t blocks,
             int64_t n_vocab)
      : f_(f), hp_(hp), src_(src), n_vocab_(n_vocab) {
    const json* e = hp.find({"num_local_experts", "num_experts", "n_routed_experts"});
    n_expert_ = e != nullptr ? e->get<int64_t>() : 0;
    for (GlobalTensor g : {GlobalTensor::TokenEmbd, GlobalTensor::OutputNorm, GlobalTensor::Output,
                           GlobalTensor::PerLayerEmbd, GlobalTensor::PerLayerModelProj,
                           GlobalTensor::PerLayerProjNorm})
      name(hf_name(f.family, g), gguf_name(g), LayerTensor::AttnNorm);
    for (int64_t l = 0; l < blocks; ++l) {
      for (size_t r = 0; r <= static_cast<size_t>(LayerTensor::ExpGateUp); ++r) {
        const auto role = static_cast<LayerTensor>(r);
        // One tensor per expert, unless the checkpoint stores them stacked (Gemma 4).
        const bool per_expert = hf_name(f.family, role, l, 0) != hf_name(f.family, role, l, 1);
        if ((role == LayerTensor::ExpGate || role == LayerTensor::ExpUp ||
             role == LayerTensor::ExpDown) &&
            per_expert) {
          for (int64_t x = 0; x < n_expert_; ++x)
            if (auto t = src.find(hf_name(f.family, role, l, x))) experts_[t->name] = {l, x, role};
          continue;
        }
        const std::string hf = hf_name(f.family, role, l);
        if (!hf.empty()) name(hf, gguf_name(f.family, role, l), role);
      }
      // MTP layers' own pieces (GLM-4.5), after the decoder's layers.
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const std::string n = "blk." + std::to_string(l) + ".nextn.";
      for (const auto& [hf, gg] : {std::pair{"eh_proj", "eh_proj"},
                                   {"enorm", "enorm"},
                                   {"hnorm", "hnorm"},
                                   {"shared_head.norm", "shared_head_norm"},
                                   {"embed_tokens", "embed_tokens"},
                                   {"shared_head.head", "shared_head_head"}})
        name(p + hf + ".weight", n + gg + ".weight", LayerTensor::AttnNorm);
    }
  }

  std::vector<ConvertTensor> build() {
    std::vector<ConvertTensor> out;
    if (f_.leading_tensors != nullptr) f_.leading_tensors(hp_, out);
    std::vector<TensorRef> all = src_.all_tensors();
    std::sort(all.begin(), all.end(),
              [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
    std::map<int64_t, std::map<std::pair<LayerTensor, int64_t>, TensorRef>> pending;
    for (const TensorRef& stored : all) {
      // FP8 block-quantised weights as their f32 values (HfDirectory), their scales consumed.
      if (stored.name.ends_with("weight_scale_inv")) continue;
      const TensorRef t = src_.find(stored.name).value_or(stored);
      if (f_.own_tensor != nullptr && f_.own_tensor(t, layer_of(t.name), hp_, src_, out)) continue;
      if (auto it = names_.find(t.name); it != names_.end()) {
        out.push_back(plain(t, it->second.first, it->second.second));
      } else if (auto ex = experts_.find(t.name); ex != experts_.end()) {
        auto& layer = pending[ex->second.layer];
        layer[{ex->second.role, ex->second.expert}] = t;
        if (static_cast<int64_t>(layer.size()) == 3 * n_expert_) {
          stack(ex->second.layer, layer, out);
          pending.erase(ex->second.layer);
        }
      } else if (!skipped_by_converter(t.name)) {
        fail(ErrorKind::Unsupported, src_.path() + ": tensor '" + t.name +
                                         "' has no GGUF name in " + f_.arch + " (a part of " +
                                         f_.hf_class + " that convert does not know)");
      }
    }
    // The converter repacks MXFP4 experts before it reads the other tensors.
    std::stable_partition(out.begin(), out.end(),
                          [](const ConvertTensor& t) { return t.raw_bytes != nullptr; });
    if (!pending.empty())
      fail(ErrorKind::Model, src_.path() + ": layer " + std::to_string(pending.begin()->first) +
                                 " lacks some of its " + std::to_string(n_expert_) +
                                 " experts' gate, up and down projections");
    return out;
  }

 private:
  void name(const std::string& hf, const std::string& gguf, LayerTensor role) {
    if (auto t = src_.find(hf)) names_[t->name] = {gguf, role};
  }

  ConvertTensor plain(const TensorRef& t, const std::string& gguf, LayerTensor role) {
    ConvertTensor c{gguf, t.dims, converter_keeps_f32(gguf, t.dims.size()), nullptr};
    const bool trim = (f_.fixes & kTrimEmbd) && gguf == gguf_name(GlobalTensor::TokenEmbd) &&
                      n_vocab_ > 0 && static_cast<int64_t>(t.dims[1]) > n_vocab_;
    if (trim) c.dims[1] = static_cast<uint64_t>(n_vocab_);
    // Every norm but the DeltaNet's gated one (Qwen3-Next), which is applied as stored.
    const bool plus_one = (f_.fixes & kNormPlusOne) && ends_with(t.name, "norm.weight") &&
                          !ends_with(t.name, "linear_attn.norm.weight");
    int64_t permute_heads = 0;
    if (f_.fixes & kPermuteQK) {
      const int64_t n_head = hp_.req_int("num_attention_heads");
      const json* kv = hp_.get("num_key_value_heads");
      if (role == LayerTensor::Wq || role == LayerTensor::Bq) permute_heads = n_head;
      if (role == LayerTensor::Wk || role == LayerTensor::Bk)
        permute_heads = kv != nullptr ? kv->get<int64_t>() : n_head;
    }
    const uint64_t n = c.elements();
    c.values = [t, n, trim, plus_one, permute_heads](float* v) {
      if (trim) {
        std::vector<float> whole(count(t.dims));
        read_f32(t, whole.data());
        std::copy(whole.begin(), whole.begin() + static_cast<int64_t>(n), v);
      } else {
        read_f32(t, v);
      }
      if (plus_one)
        for (uint64_t i = 0; i < n; ++i) v[i] += 1.0f;
      if (permute_heads > 0) {
        const int64_t cols = t.dims.size() > 1 ? static_cast<int64_t>(t.dims[0]) : 1;
        permute_rows(v, static_cast<int64_t>(n) / cols, cols, permute_heads);
      }
    };
    return c;
  }

  // gate, up and down of every expert as three tensors, in the order of the HF names the
  // converter meets them by (w1 w2 w3; down_proj gate_proj up_proj).
  void stack(int64_t layer, const std::map<std::pair<LayerTensor, int64_t>, TensorRef>& parts,
             std::vector<ConvertTensor>& out) {
    std::vector<LayerTensor> roles = {LayerTensor::ExpGate, LayerTensor::ExpUp,
                                      LayerTensor::ExpDown};
    std::sort(roles.begin(), roles.end(), [&](LayerTensor a, LayerTensor b) {
      return hf_name(f_.family, a, layer, 0) < hf_name(f_.family, b, layer, 0);
    });
    for (LayerTensor role : roles) {
      std::vector<TensorRef> refs;
      for (int64_t x = 0; x < n_expert_; ++x) refs.push_back(parts.at({role, x}));
      for (const TensorRef& r : refs)
        if (r.dims != refs[0].dims)
          fail(ErrorKind::Model, src_.path() + ": expert tensor '" + r.name + "' has shape " +
                                     r.shape_string() + ", unlike " + refs[0].name);
      std::vector<uint64_t> dims = refs[0].dims;
      dims.push_back(static_cast<uint64_t>(n_expert_));
      const std::string gguf = gguf_name(f_.family, role, layer);
      const uint64_t each = count(refs[0].dims);
      out.push_back({gguf, dims, converter_keeps_f32(gguf, dims.size()), [refs, each](float* v) {
                       for (size_t x = 0; x < refs.size(); ++x) read_f32(refs[x], v + x * each);
                     }});
    }
  }

  const ConvertFamily& f_;
  const Hparams& hp_;
  const ModelSource& src_;
  int64_t n_vocab_;
  int64_t n_expert_ = 0;
  std::map<std::string, std::pair<std::string, LayerTensor>> names_;  // stored name -> GGUF, role
  std::map<std::string, ExpertSlot> experts_;
};

}  // namespace

void llama3_rope_freqs(const Hparams& hp, std::vector<ConvertTensor>& out) {
  const json& rope = hp.rope_full();
  if (rope.value("rope_type", std::string()) != "llama3") return;
  const json* hd = hp.get("head_dim");
  const int64_t dim =
      hd ? hd->get<int64_t>() : hp.req_int("hidden_size") / hp.req_int("num_attention_heads");
  auto freqs = std::make_shared<std::vector<float>>(llama3_freq_divisors(rope, dim));
  out.push_back({gguf_name(GlobalTensor::RopeFreqs), {freqs->size()}, true, [freqs](float* v) {
                   std::copy(freqs->begin(), freqs->end(), v);
                 }});
}

uint64_t ConvertTensor::elements() const {
  return count(dims);
}

void read_f32(const TensorRef& t, float* out) {
  dequantize_row(t.dtype, t.data(), out, static_cast<int64_t>(count(t.dims)));
}

ConvertTensor transposed_experts(const TensorRef& t, const std::string& name, int64_t first,
                                 int64_t step, uint64_t rows) {
  const uint64_t width = t.dims[0], in = t.dims[1], experts = t.dims[2];
  ConvertTensor c{name, {in, rows, experts}, converter_keeps_f32(name, 3), nullptr};
  c.values = [t, width, in, experts, rows, first, step](float* v) {
    std::vector<float> src(width * in * experts);
    read_f32(t, src.data());
    for (uint64_t e = 0; e < experts; ++e)
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t i = 0; i < in; ++i)
          v[(e * rows + r) * in + i] = src[(e * in + i) * width + static_cast<uint64_t>(first) +
                                           r * static_cast<uint64_t>(step)];
  };
  return c;
}

bool converter_keeps_f32(const std::string& gguf, size_t n_dims) {
  // Position and token-type tables (BERT's, a vision tower's) too.
  if (gguf == "position_embd.weight" || gguf == "token_types.weight" ||
      gguf == "v.position_embd.weight")
    return true;
  return n_dims <= 1 || ends_with(gguf, "_norm.weight") || !ends_with(gguf, ".weight") ||
         gguf.find("ffn_gate_inp.weight") != std::string::npos ||
         gguf.find("ffn_gate_inp_shexp.weight") != std::string::npos ||
         gguf.find("ssm_conv1d.weight") != std::string::npos;
}

std::vector<ConvertTensor> convert_tensors(const ConvertFamily& f, const Hparams& hp,
                                           const ModelSource& source, int64_t block_count,
                                           int64_t n_vocab) {
  return TensorPlan(f, hp, source, block_count, n_vocab).build();
}

}  // namespace ts

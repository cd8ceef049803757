#include "model/model_spec.h"

#include "core/checked.h"
#include "core/error.h"
#include "model/family.h"

namespace ts {
namespace {

[[noreturn]] void refuse(const std::string& where, const std::string& msg) {
  fail(ErrorKind::Model, where + ": " + msg);
}

void check_range(const std::string& where, const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    refuse(where, std::string(name) + " = " + std::to_string(v) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

std::string dims_string(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

class Indexer {
 public:
  Indexer(ModelSpec& spec) : s_(spec), c_(spec.cfg), where_(spec.source->path()) {}

  void run() {
    const bool gguf = c_.source == SourceKind::Gguf;
    s_.token_embd = need(global(GlobalTensor::TokenEmbd), {c_.n_embd, c_.n_vocab}, true);
    s_.output_norm = need(global(GlobalTensor::OutputNorm), {c_.n_embd}, false);
    std::optional<TensorRef> out = s_.source->find(global(GlobalTensor::Output));
    // GGUF writes no output.weight for a tied model; HF states it in the config.
    if (gguf) c_.tied_embeddings = !out.has_value();
    if (c_.tied_embeddings) {
      s_.output = s_.token_embd;
    } else {
      s_.output = need(global(GlobalTensor::Output), {c_.n_embd, c_.n_vocab}, true);
    }
    if (gguf) {
      s_.rope_freqs = s_.source->find(gguf_name(GlobalTensor::RopeFreqs));
      if (s_.rope_freqs) {
        // The format's only signal of llama3 rope scaling is this tensor of divisors.
        if (c_.rope_scaling == RopeScaling::Linear)
          fail(ErrorKind::Unsupported, s_.source->path() +
                                           ": rope_freqs and a linear rope.scaling.factor "
                                           "together are not supported");
        if (!c_.layer_head_dim.empty()) {
          // Gemma 4: the global layers' proportional rope (divisors 1 or 1e30), no scaling.
          s_.rope_freqs = need(gguf_name(GlobalTensor::RopeFreqs), {global_head_dim() / 2}, false);
        } else {
          c_.rope_freqs_tensor = true;
          c_.rope_scaling = RopeScaling::Llama3;
          s_.rope_freqs = need(gguf_name(GlobalTensor::RopeFreqs), {c_.rotary_dim / 2}, false);
        }
      }
    }
    if (c_.n_embd_per_layer > 0) {
      const int64_t width = c_.n_layer * c_.n_embd_per_layer;
      s_.per_layer_embd = need(global(GlobalTensor::PerLayerEmbd), {width, c_.n_vocab}, true);
      s_.per_layer_model_proj =
          need(global(GlobalTensor::PerLayerModelProj), {c_.n_embd, width}, true);
      s_.per_layer_proj_norm =
          need(global(GlobalTensor::PerLayerProjNorm), {c_.n_embd_per_layer}, false);
    }
    // A Gemma 4 GGUF states k = v only by the global layers' missing v projection (the converter
    // writes no key for it; llama.cpp reads it so too).
    if (gguf && c_.attn_v_norm)
      for (int64_t l = 0; l < c_.n_layer; ++l)
        if (!c_.layer_sliding[static_cast<size_t>(l)] && c_.holds_kv(l)) {
          c_.attn_k_eq_v = !s_.source->find(layer_name(LayerTensor::Wv, l)).has_value();
          break;
        }
    s_.layers.resize(static_cast<size_t>(c_.n_layer));
    for (int64_t l = 0; l < c_.n_layer; ++l) index_layer(l);
  }

 private:
  std::string global(GlobalTensor t) const {
    return c_.source == SourceKind::Gguf ? gguf_name(t) : hf_name(c_.family, t);
  }
  int64_t global_head_dim() const {
    for (int64_t l = 0; l < c_.n_layer; ++l)
      if (!c_.layer_sliding[static_cast<size_t>(l)]) return c_.head_dim_of(l);
    return c_.head_dim;
  }
  std::string layer_name(LayerTensor t, int64_t l, int64_t e = -1) const {
    return c_.source == SourceKind::Gguf ? gguf_name(c_.family, t, l) : hf_name(c_.family, t, l, e);
  }

  // Finds `name` and checks its GGML-order shape and dtype (a matrix must be a dtype the matmul
  // kernels take; a vector must be float).
  TensorRef need(const std::string& name, std::vector<int64_t> dims, bool matrix) {
    std::optional<TensorRef> t = s_.source->find(name);
    if (!t)
      refuse(where_,
             "missing tensor '" + name + "' (required by family " + family_name(c_.family) + ")");
    check_shape(*t, dims);
    if (matrix && !is_weight_dtype_supported(t->dtype))
      fail(ErrorKind::Unsupported, where_ + ": tensor '" + name + "' has type " +
                                       dtype_name(t->dtype) +
                                       ", which the matmul kernels do not support");
    if (!matrix && t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      fail(ErrorKind::Unsupported, where_ + ": tensor '" + name + "' has type " +
                                       dtype_name(t->dtype) + ", expected f32, f16 or bf16");
    return *t;
  }

  void check_shape(const TensorRef& t, const std::vector<int64_t>& dims) const {
    bool ok = t.dims.size() == dims.size();
    for (size_t i = 0; ok && i < dims.size(); ++i) ok = static_cast<int64_t>(t.dims[i]) == dims[i];
    if (!ok) {
      std::vector<uint64_t> want(dims.begin(), dims.end());
      refuse(where_, "tensor '" + t.name + "' has shape " + dims_string(t.dims) + ", expected " +
                         dims_string(want) + " (GGML order)");
    }
  }

  void index_layer(int64_t l) {
    LayerIndex& L = s_.layers[static_cast<size_t>(l)];
    const auto put = [&](LayerTensor t, std::vector<int64_t> dims, bool matrix) {
      L.tensors[static_cast<size_t>(t)] = need(layer_name(t, l), std::move(dims), matrix);
    };
    put(LayerTensor::AttnNorm, {c_.n_embd}, false);
    if (c_.layer_mixer[static_cast<size_t>(l)] == MixerKind::DeltaNet) {
      index_delta_net(put);
    } else if (c_.layer_mixer[static_cast<size_t>(l)] == MixerKind::Mla) {
      index_mla(l, put);
    } else {
      index_attention(l, put);
    }
    if (c_.sandwich_norms) {
      put(LayerTensor::AttnPostNorm, {c_.n_embd}, false);
      put(LayerTensor::FfnPostNorm, {c_.n_embd}, false);
    }
    put(LayerTensor::FfnNorm, {c_.n_embd}, false);
    if (c_.n_embd_per_layer > 0) {
      put(LayerTensor::PleGate, {c_.n_embd, c_.n_embd_per_layer}, true);
      put(LayerTensor::PleProj, {c_.n_embd_per_layer, c_.n_embd}, true);
      put(LayerTensor::PleNorm, {c_.n_embd}, false);
    }
    if (c_.layer_output_scale) put(LayerTensor::OutScale, {1}, false);
    const bool moe = c_.layer_moe[static_cast<size_t>(l)] != 0;
    if (!moe || c_.moe_dense_beside) {
      const int64_t ff = c_.n_ff_of(l);
      if (ff <= 0)
        refuse(where_, "layer " + std::to_string(l) + " is dense but the FFN width is 0");
      put(LayerTensor::FfnGate, {c_.n_embd, ff}, true);
      put(LayerTensor::FfnUp, {c_.n_embd, ff}, true);
      put(LayerTensor::FfnDown, {ff, c_.n_embd}, true);
    }
    if (!moe) return;
    if (c_.moe_dense_beside) {
      put(LayerTensor::FfnPostNorm1, {c_.n_embd}, false);
      put(LayerTensor::FfnPreNorm2, {c_.n_embd}, false);
      put(LayerTensor::FfnPostNorm2, {c_.n_embd}, false);
      put(LayerTensor::RouterScale, {c_.n_embd}, false);
      put(LayerTensor::ExpScale, {c_.n_expert}, false);
    }
    put(LayerTensor::Router, {c_.n_embd, c_.n_expert}, true);
    if (c_.router_bias) put(LayerTensor::RouterBias, {c_.n_expert}, false);
    if (c_.router_logit_bias) put(LayerTensor::RouterLogitBias, {c_.n_expert}, false);
    if (c_.expert_bias) index_expert_biases(put);
    if (c_.n_ff_shared > 0) {
      put(LayerTensor::ShexpGate, {c_.n_embd, c_.n_ff_shared}, true);
      put(LayerTensor::ShexpUp, {c_.n_embd, c_.n_ff_shared}, true);
      put(LayerTensor::ShexpDown, {c_.n_ff_shared, c_.n_embd}, true);
      if (c_.shared_expert_gate) put(LayerTensor::ShexpGateInp, {c_.n_embd, 1}, true);
    }
    index_experts(l, L);
  }

  template <typename Put>
  void index_attention(int64_t l, const Put& put) {
    const int64_t hd = c_.head_dim_of(l);
    const int64_t q_width = c_.n_head * hd;
    const int64_t kv_width = c_.n_head_kv_of(l) * hd;
    // A layer that reads another's KV rows projects no k or v; k = v layers no v.
    const bool holds_kv = c_.holds_kv(l);
    const bool has_v = holds_kv && !(c_.attn_k_eq_v && !c_.layer_sliding[static_cast<size_t>(l)]);
    // An output gate doubles the q projection: per head, head_dim query rows then head_dim gate
    // rows.
    put(LayerTensor::Wq, {c_.n_embd, c_.attn_output_gate ? 2 * q_width : q_width}, true);
    if (holds_kv) put(LayerTensor::Wk, {c_.n_embd, kv_width}, true);
    if (has_v) put(LayerTensor::Wv, {c_.n_embd, kv_width}, true);
    put(LayerTensor::Wo, {q_width, c_.n_embd}, true);
    if (c_.attn_out_bias) put(LayerTensor::Bo, {c_.n_embd}, false);
    if (c_.attn_sinks) put(LayerTensor::AttnSinks, {c_.n_head}, false);
    if (c_.qkv_bias) {
      put(LayerTensor::Bq, {q_width}, false);
      put(LayerTensor::Bk, {kv_width}, false);
      put(LayerTensor::Bv, {kv_width}, false);
    }
    if (c_.qk_norm == QkNorm::PerHead) {
      put(LayerTensor::QNorm, {hd}, false);
      if (holds_kv) put(LayerTensor::KNorm, {hd}, false);
    } else if (c_.qk_norm == QkNorm::WholeProjection) {
      put(LayerTensor::QNorm, {q_width}, false);
      put(LayerTensor::KNorm, {kv_width}, false);
    }
  }

  // Qwen3-Next's checkpoints fuse per key head [q k v z] into one projection and [beta alpha] into
  // another (its GGUFs the latter only); the engine takes them apart by rows (delta_net_rows.h).
  template <typename Put>
  void index_delta_net(const Put& put) {
    const DeltaNetConfig& d = c_.delta;
    const int64_t n = c_.n_embd, nv = d.n_v_heads, vd = d.value_dim();
    const bool qkvz_fused = c_.family == Family::Qwen3Next && c_.source == SourceKind::HfDir;
    const bool ba_fused = c_.family == Family::Qwen3Next;
    put(LayerTensor::DnQkv, {n, d.conv_channels() + (qkvz_fused ? vd : 0)}, true);
    if (!qkvz_fused) put(LayerTensor::DnZ, {n, vd}, true);
    put(LayerTensor::DnBeta, {n, ba_fused ? 2 * nv : nv}, true);
    if (!ba_fused) put(LayerTensor::DnAlpha, {n, nv}, true);
    // The depthwise taps: GGUF squeezes HF's [channels, 1, kernel] to [channels, kernel].
    if (c_.source == SourceKind::Gguf) {
      put(LayerTensor::DnConv, {d.conv_kernel, d.conv_channels()}, false);
    } else {
      put(LayerTensor::DnConv, {d.conv_kernel, 1, d.conv_channels()}, false);
    }
    put(LayerTensor::DnA, {nv}, false);
    put(LayerTensor::DnDtBias, {nv}, false);
    put(LayerTensor::DnNorm, {d.v_head_dim}, false);
    put(LayerTensor::DnOut, {vd, n}, true);
  }

  // MLA's projections. The sizes come from config fields the tensors must agree with: a mismatch
  // names the fields as well as the tensor.
  template <typename Put>
  void index_mla(int64_t l, const Put& put) {
    const MlaConfig& m = c_.mla;
    const int64_t n = c_.n_embd, H = c_.n_head, q_width = H * m.qk_head_dim();
    const auto sized = [&](LayerTensor t, std::vector<int64_t> dims, bool matrix,
                           const std::string& fields) {
      const std::string name = layer_name(t, l);
      if (std::optional<TensorRef> found = s_.source->find(name)) {
        const std::vector<uint64_t> want(dims.begin(), dims.end());
        if (found->dims != want)
          refuse(where_, fields + " do not match tensor '" + name + "' of shape " +
                             dims_string(found->dims) + " (expected " + dims_string(want) + ")");
      }
      put(t, std::move(dims), matrix);
    };
    if (m.q_lora_rank > 0) {
      sized(LayerTensor::MlaQa, {n, m.q_lora_rank}, true, "q_lora_rank");
      put(LayerTensor::MlaQaNorm, {m.q_lora_rank}, false);
      sized(LayerTensor::MlaQb, {m.q_lora_rank, q_width}, true,
            "q_lora_rank, qk_nope_head_dim and qk_rope_head_dim");
    } else {
      sized(LayerTensor::Wq, {n, q_width}, true, "qk_nope_head_dim and qk_rope_head_dim");
    }
    sized(LayerTensor::MlaKvA, {n, m.row_width()}, true, "kv_lora_rank and qk_rope_head_dim");
    sized(LayerTensor::MlaKvNorm, {m.kv_lora_rank}, false, "kv_lora_rank");
    if (c_.source == SourceKind::Gguf) {
      // llama.cpp's converter splits kv_b per head: k_b transposed, v_b as is.
      sized(LayerTensor::MlaKb, {m.qk_nope_head_dim, m.kv_lora_rank, H}, true,
            "kv_lora_rank and qk_nope_head_dim");
      sized(LayerTensor::MlaVb, {m.kv_lora_rank, m.v_head_dim, H}, true,
            "kv_lora_rank and v_head_dim");
    } else {
      sized(LayerTensor::MlaKb, {m.kv_lora_rank, H * (m.qk_nope_head_dim + m.v_head_dim)}, true,
            "kv_lora_rank, qk_nope_head_dim and v_head_dim");
    }
    sized(LayerTensor::Wo, {H * m.v_head_dim, n}, true, "v_head_dim");
  }

  // Per expert, [rows] of each projection: GGUF stacks them [rows, n_expert]; gpt-oss's
  // checkpoints hold gate and up as one [2 ff, n_expert], interleaved (ExpGateBias alone).
  template <typename Put>
  void index_expert_biases(const Put& put) {
    const int64_t E = c_.n_expert, ff = c_.n_ff_expert;
    if (c_.source == SourceKind::Gguf) {
      put(LayerTensor::ExpGateBias, {ff, E}, false);
      put(LayerTensor::ExpUpBias, {ff, E}, false);
    } else {
      put(LayerTensor::ExpGateBias, {2 * ff, E}, false);
    }
    put(LayerTensor::ExpDownBias, {c_.n_embd, E}, false);
  }

  // gpt-oss's checkpoints: per layer one gate_up and one down tensor for every expert, f32
  // [E][in][out] (gate and up interleaved by output column), or MXFP4 as `_blocks`
  // [E][out][in / 32][16] and `_scales` [E][out][in / 32] (gate and up interleaved by row).
  void index_fused_experts(int64_t l, LayerIndex& L) {
    const int64_t E = c_.n_expert, ff = c_.n_ff_expert, d = c_.n_embd;
    const auto e64 = static_cast<uint64_t>(E);
    for (const bool down : {false, true}) {
      const std::string name = layer_name(down ? LayerTensor::ExpDown : LayerTensor::ExpGate, l);
      const int64_t out = down ? d : 2 * ff, in = down ? ff : d;
      std::vector<ExpertSlice> parts(down ? 1 : 2);  // [gate, up] or [down]
      if (s_.source->find(name)) {
        const TensorRef t = need(name, {out, in, E}, true);
        if (t.dtype != DType::F32)
          fail(ErrorKind::Unsupported, where_ + ": tensor '" + name + "' has type " +
                                           dtype_name(t.dtype) + ", expected f32 or MXFP4 blocks");
        for (size_t p = 0; p < parts.size(); ++p)
          parts[p] = {
              .file = t.file,
              .offset = t.offset,
              .nbytes = static_cast<uint64_t>(out / static_cast<int64_t>(parts.size()) * in) * 4,
              .dtype = DType::F32,
              .rows = out / static_cast<int64_t>(parts.size()),
              .cols = in,
              .layout = SliceLayout::Columns,
              .src_bytes = t.nbytes / e64,
              .first = static_cast<int64_t>(p),
              .step = static_cast<int64_t>(parts.size()),
              .src_width = out};
      } else {
        if (in % 32 != 0)
          refuse(where_, "tensor '" + name + "_blocks': " + std::to_string(in) +
                             " input columns are not a whole number of MXFP4 blocks of 32");
        const TensorRef b = need_bytes(name + "_blocks", {16, in / 32, out, E});
        const TensorRef sc = need_bytes(name + "_scales", {in / 32, out, E});
        const int64_t rows = out / static_cast<int64_t>(parts.size());
        for (size_t p = 0; p < parts.size(); ++p)
          parts[p] = {.file = b.file,
                      .offset = b.offset,
                      .nbytes = static_cast<uint64_t>(rows * (in / 32) * 17),
                      .dtype = DType::MXFP4,
                      .rows = rows,
                      .cols = in,
                      .layout = SliceLayout::Mxfp4Planes,
                      .src_bytes = b.nbytes / e64,
                      .scale_offset = sc.offset,
                      .scale_bytes = sc.nbytes / e64,
                      .first = static_cast<int64_t>(p),
                      .step = static_cast<int64_t>(parts.size())};
      }
      for (int64_t e = 0; e < E; ++e)
        for (size_t p = 0; p < parts.size(); ++p) {
          ExpertSlice x = parts[p];
          x.offset += x.src_bytes * static_cast<uint64_t>(e);
          x.scale_offset += x.scale_bytes * static_cast<uint64_t>(e);
          L.experts[static_cast<size_t>(e)][down ? size_t{kExpDown} : p] = x;
        }
    }
  }

  // Gemma 4 (both formats) and Qwen3-VL-MoE's HF checkpoints: per layer one tensor of every
  // expert's gate rows then its up rows, [n_embd, 2 ff, E], and one of the down projections,
  // [ff, n_embd, E] (transformers' layout). Qwen3-VL-MoE's released checkpoints store each
  // transposed, [2 ff, n_embd, E] and [n_embd, ff, E] (the form llama.cpp's converter reads);
  // transformers takes a tensor whose shape is not its own as transposed, and so do we.
  void index_gate_up_experts(int64_t l, LayerIndex& L) {
    const int64_t E = c_.n_expert, ff = c_.n_ff_expert, d = c_.n_embd;
    const bool transposable = c_.family == Family::Qwen3VLMoe;
    const Fused gu =
        fused_experts(layer_name(LayerTensor::ExpGateUp, l), d, 2 * ff, 2, transposable);
    const Fused dn = fused_experts(layer_name(LayerTensor::ExpDown, l), ff, d, 1, transposable);
    for (int64_t e = 0; e < E; ++e) {
      auto& x = L.experts[static_cast<size_t>(e)];
      x[kExpGate] = gu.of(0, e);
      x[kExpUp] = gu.of(1, e);
      x[kExpDown] = dn.of(0, e);
    }
  }

  // A fused tensor of every expert's projections: expert 0's slices, and the bytes from one
  // expert's to the next's.
  struct Fused {
    std::array<ExpertSlice, 2> part;
    uint64_t slab = 0;
    ExpertSlice of(size_t p, int64_t e) const {
      ExpertSlice x = part[p];
      x.offset += slab * static_cast<uint64_t>(e);
      return x;
    }
  };

  // The tensor `name` of [cols, rows, E] (GGML order), each expert's rows `parts` projections of
  // rows / parts; a transposable one may be [rows, cols, E] instead, read by columns.
  Fused fused_experts(const std::string& name, int64_t cols, int64_t rows, int64_t parts,
                      bool transposable) {
    const int64_t E = c_.n_expert, part_rows = rows / parts;
    const std::optional<TensorRef> found = s_.source->find(name);
    const std::vector<uint64_t> flipped = {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                           static_cast<uint64_t>(E)};
    const bool transposed = transposable && rows != cols && found && found->dims == flipped;
    const TensorRef t =
        need(name,
             transposed ? std::vector<int64_t>{rows, cols, E} : std::vector<int64_t>{cols, rows, E},
             true);
    if (transposed && t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      fail(ErrorKind::Unsupported, where_ + ": tensor '" + name + "' has type " +
                                       dtype_name(t.dtype) +
                                       ", expected f32, f16 or bf16 (stored transposed)");
    Fused f;
    f.slab = t.nbytes / static_cast<uint64_t>(E);
    for (int64_t p = 0; p < parts; ++p) {
      ExpertSlice& x = f.part[static_cast<size_t>(p)];
      x = {t.file, t.offset, f.slab / static_cast<uint64_t>(parts), t.dtype, part_rows, cols};
      if (!transposed) {
        x.offset += x.nbytes * static_cast<uint64_t>(p);
        continue;
      }
      x.layout = SliceLayout::Columns;
      x.src_bytes = f.slab;
      x.first = p * part_rows;
      x.src_width = rows;
    }
    return f;
  }

  // A uint8 tensor of exactly these GGML-order dims (MXFP4 planes).
  TensorRef need_bytes(const std::string& name, const std::vector<int64_t>& dims) {
    std::optional<TensorRef> t = s_.source->find(name);
    if (!t)
      refuse(where_,
             "missing tensor '" + name + "' (required by family " + family_name(c_.family) + ")");
    check_shape(*t, dims);
    if (t->dtype != DType::U8)
      refuse(where_, "tensor '" + name + "' has type " + dtype_name(t->dtype) + ", expected u8");
    return *t;
  }

  void index_experts(int64_t l, LayerIndex& L) {
    const int64_t E = c_.n_expert, ff = c_.n_ff_expert, d = c_.n_embd;
    L.experts.resize(static_cast<size_t>(E));
    if (c_.family == Family::GptOss && c_.source == SourceKind::HfDir)
      return index_fused_experts(l, L);
    if (c_.family == Family::Gemma4 ||
        (c_.family == Family::Qwen3VLMoe && c_.source == SourceKind::HfDir))
      return index_gate_up_experts(l, L);
    const LayerTensor roles[3] = {LayerTensor::ExpGate, LayerTensor::ExpUp, LayerTensor::ExpDown};
    const int64_t rows[3] = {ff, ff, d};
    const int64_t cols[3] = {d, d, ff};
    for (int p = 0; p < 3; ++p) {
      if (c_.source == SourceKind::Gguf) {
        // One stacked [cols, rows, n_expert] tensor: expert e is the e-th slab of rows x cols.
        const TensorRef t = need(gguf_name(roles[p], l), {cols[p], rows[p], E}, true);
        const uint64_t slab = t.nbytes / static_cast<uint64_t>(E);
        for (int64_t e = 0; e < E; ++e)
          L.experts[static_cast<size_t>(e)][p] = {
              t.file, t.offset + slab * static_cast<uint64_t>(e), slab, t.dtype, rows[p], cols[p]};
      } else {
        for (int64_t e = 0; e < E; ++e) {
          const TensorRef t = need(hf_name(c_.family, roles[p], l, e), {cols[p], rows[p]}, true);
          L.experts[static_cast<size_t>(e)][p] = {t.file,  t.offset, t.nbytes,
                                                  t.dtype, rows[p],  cols[p]};
        }
      }
    }
  }

  ModelSpec& s_;
  ArchConfig& c_;
  std::string where_;
};

uint64_t tensor_sum(const ModelSpec& s) {
  uint64_t total = 0;
  auto add = [&](const TensorRef& t) { total = checked_add(total, t.nbytes, "resident bytes"); };
  add(s.token_embd);
  add(s.output_norm);
  if (!s.cfg.tied_embeddings) add(s.output);
  if (s.rope_freqs) add(*s.rope_freqs);
  if (s.per_layer_model_proj) add(*s.per_layer_model_proj);
  if (s.per_layer_proj_norm) add(*s.per_layer_proj_norm);
  for (const LayerIndex& L : s.layers)
    for (const auto& t : L.tensors)
      if (t) add(*t);
  return total;
}

void validate_delta_net(const DeltaNetConfig& d, const std::string& w) {
  check_range(w, "DeltaNet key heads", d.n_k_heads, 1, 4096);
  check_range(w, "DeltaNet value heads", d.n_v_heads, 1, 4096);
  if (d.n_v_heads % d.n_k_heads != 0)
    refuse(w, "DeltaNet value heads " + std::to_string(d.n_v_heads) +
                  " are not a multiple of its key heads " + std::to_string(d.n_k_heads));
  check_range(w, "DeltaNet key head dim", d.k_head_dim, 1, 1024);
  check_range(w, "DeltaNet value head dim", d.v_head_dim, 1, 1024);
  // The decode kernels keep a channel's window in registers.
  check_range(w, "DeltaNet conv kernel", d.conv_kernel, 1, 8);
}

void validate_mla(const ArchConfig& c, const std::string& w) {
  const MlaConfig& m = c.mla;
  check_range(w, "q_lora_rank", m.q_lora_rank, 0, 1 << 16);
  check_range(w, "kv_lora_rank", m.kv_lora_rank, 1, 1 << 16);
  check_range(w, "qk_nope_head_dim", m.qk_nope_head_dim, 1, 1024);
  check_range(w, "v_head_dim", m.v_head_dim, 1, 1024);
  if (m.qk_rope_head_dim <= 0 || m.qk_rope_head_dim > 1024 || m.qk_rope_head_dim % 2 != 0)
    refuse(w, "qk_rope_head_dim " + std::to_string(m.qk_rope_head_dim) +
                  " must be even and within (0, 1024]");
  // A factor on the rotation would scale the rope part of the scores only; the absorbed scores
  // take one scale.
  if (c.rope_attn_factor != 1.0f)
    refuse(w,
           "YaRN mscale != mscale_all_dim (a factor on the rotated dims alone) is not "
           "supported with MLA");
}

void validate_group_routing(const ArchConfig& c, const std::string& w) {
  check_range(w, "n_group", c.n_group, 1, c.n_expert);
  if (c.n_expert % c.n_group != 0)
    refuse(w, "n_group " + std::to_string(c.n_group) + " does not divide the " +
                  std::to_string(c.n_expert) + " experts");
  if (c.topk_group < 1 || c.topk_group > c.n_group)
    refuse(w, "topk_group " + std::to_string(c.topk_group) + " is not within [1, n_group " +
                  std::to_string(c.n_group) + "]");
  const int64_t kept = c.topk_group * (c.n_expert / c.n_group);
  if (c.n_expert_used > kept)
    refuse(w, "expert_used_count " + std::to_string(c.n_expert_used) + " is more than the " +
                  std::to_string(kept) + " experts of the topk_group " +
                  std::to_string(c.topk_group) + " kept groups");
}

}  // namespace

uint64_t LayerIndex::expert_bytes(int64_t e) const {
  const auto& x = experts[static_cast<size_t>(e)];
  return x[0].nbytes + x[1].nbytes + x[2].nbytes;
}

uint64_t LayerIndex::expert_stride() const {
  uint64_t stride = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(experts.size()); ++e)
    stride = std::max(stride, expert_bytes(e));
  return stride;
}

void validate_arch(const ArchConfig& c, const std::string& w) {
  check_range(w, "block_count", c.n_layer, 1, 4096);
  check_range(w, "hidden size", c.n_embd, 1, 1 << 20);
  check_range(w, "head count", c.n_head, 1, 65536);
  check_range(w, "kv head count", c.n_head_kv, 1, c.n_head);
  if (c.n_head % c.n_head_kv != 0)
    refuse(w, "head count " + std::to_string(c.n_head) + " is not a multiple of kv head count " +
                  std::to_string(c.n_head_kv));
  check_range(w, "head_dim", c.head_dim, 2, 1024);
  // MLA's head and rotary sizes come from its own fields: errors name those.
  if (c.has_mixer(MixerKind::Mla)) validate_mla(c, w);
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
    refuse(w, "rotary dimension " + std::to_string(c.rotary_dim) +
                  " must be even and within (0, head_dim " + std::to_string(c.head_dim) + "]");
  check_range(w, "vocab size", c.n_vocab, 0, 1 << 24);
  check_range(w, "feed-forward width", c.n_ff, 0, 1 << 22);
  if (!(c.rms_eps > 0 && c.rms_eps < 1))
    refuse(w, "rms epsilon " + std::to_string(c.rms_eps) + " is not in (0, 1)");
  if (!(c.rope_theta > 0)) refuse(w, "rope theta is missing or not positive");
  if ((c.n_expert == 0) != (c.n_expert_used == 0))
    refuse(w, "expert_count " + std::to_string(c.n_expert) + " and expert_used_count " +
                  std::to_string(c.n_expert_used) + " must be both zero or both positive");
  if (c.n_expert > 0) {
    check_range(w, "expert_count", c.n_expert, 1, 1 << 16);
    check_range(w, "expert_used_count", c.n_expert_used, 1,
                std::min(c.n_expert, kMaxExpertsPerToken));
    check_range(w, "expert feed-forward width", c.n_ff_expert, 1, 1 << 22);
    if (c.router == RouterScoring::None) refuse(w, "experts without a router scoring rule");
    if (c.router == RouterScoring::SigmoidGroupTopk) validate_group_routing(c, w);
    if (!(c.routed_scale > 0))
      refuse(w, "routed_scaling_factor " + std::to_string(c.routed_scale) + " must be > 0");
  }
  for (size_t l = 0; l < c.layer_sliding.size(); ++l)
    if (c.layer_sliding[l] && c.sliding_window <= 0)
      refuse(w, "layer " + std::to_string(l) + " uses sliding-window attention but the window is " +
                    std::to_string(c.sliding_window));
  if (c.layer_mixer.size() != static_cast<size_t>(c.n_layer))
    refuse(w, "the layer pattern has " + std::to_string(c.layer_mixer.size()) + " entries for " +
                  std::to_string(c.n_layer) + " layers");
  if (c.has_mixer(MixerKind::DeltaNet)) validate_delta_net(c.delta, w);
  if (c.ffn_act == FfnActivation::SwiGluClamped) {
    for (size_t l = 0; l < c.layer_moe.size(); ++l)
      if (!c.layer_moe[l])
        refuse(w, "layer " + std::to_string(l) +
                      " is dense, but the clamped SwiGLU is implemented for experts only");
    if (!(c.swiglu_limit > 0 && c.swiglu_alpha > 0))
      refuse(w, "swiglu_limit and swiglu_alpha must be positive");
  }
  if (c.n_ff_shared < 0 || c.n_ff_shared > (1 << 22))
    refuse(w, "shared expert width " + std::to_string(c.n_ff_shared) + " is out of range");
  if (c.rope_scaling == RopeScaling::Llama3 && !c.rope_freqs_tensor) {
    if (!(c.rope_factor > 0 && c.rope_high_freq_factor > c.rope_low_freq_factor &&
          c.rope_orig_ctx > 0))
      refuse(w,
             "llama3 rope scaling needs factor > 0, high_freq_factor > low_freq_factor, original "
             "context > 0");
  }
  if (c.rope_scaling == RopeScaling::Linear && !(c.rope_factor > 0))
    refuse(w, "linear rope factor must be > 0");
  if (c.rope_scaling == RopeScaling::Yarn) {
    if (!(c.rope_factor > 0 && c.rope_orig_ctx > 0 && c.rope_beta_fast > 0 && c.rope_beta_slow > 0))
      refuse(w, "YaRN rope scaling needs factor, original context and betas > 0");
    // Its attention factor multiplies the rotated elements only, folded here into the scores'
    // scale: every element of every layer's heads must be rotated with the same frequencies.
    // Sliding layers rotating by their own unscaled frequencies would need a factor of their own.
    bool any_sliding = false;
    for (uint8_t s : c.layer_sliding) any_sliding = any_sliding || s != 0;
    if (c.rope_attn_factor != 1.0f &&
        (c.rotary_dim != c.head_dim || (any_sliding && !c.rope_local_scaled)))
      refuse(w, "YaRN rope scaling with partial rotary or sliding-window layers is not supported");
  }
}

std::unique_ptr<ModelSpec> open_model_spec(const std::string& path) {
  auto spec = std::make_unique<ModelSpec>();
  spec->source = ModelSource::open(path);
  spec->cfg = read_arch_config(*spec->source);
  ArchConfig& c = spec->cfg;
  if (c.stack == LayerStack::Encoder)
    fail(ErrorKind::Unsupported, path + ": " + family_name(c.family) +
                                     " is an encoder model: it serves embeddings only, through "
                                     "`turbospark embed` or `serve` (it cannot generate)");
  // A GGUF may omit the vocab size: the embedding table states it.
  if (c.n_vocab == 0) {
    auto emb = spec->source->find(c.source == SourceKind::Gguf
                                      ? gguf_name(GlobalTensor::TokenEmbd)
                                      : hf_name(c.family, GlobalTensor::TokenEmbd));
    if (emb && emb->dims.size() == 2) c.n_vocab = static_cast<int64_t>(emb->dims[1]);
  }
  validate_arch(c, spec->source->path());
  Indexer(*spec).run();
  validate_arch(c, spec->source->path());  // the tensors may have settled rope scaling / tying
  spec->resident_bytes = tensor_sum(*spec);
  if (spec->per_layer_embd) spec->mapped_bytes = spec->per_layer_embd->nbytes;
  for (const LayerIndex& L : spec->layers) {
    const uint64_t stride = L.expert_stride();
    spec->expert_stride = std::max(spec->expert_stride, stride);
    spec->expert_slot_set = checked_add(spec->expert_slot_set, stride, "expert slots");
    for (int64_t e = 0; e < static_cast<int64_t>(L.experts.size()); ++e)
      spec->routed_expert_bytes =
          checked_add(spec->routed_expert_bytes, L.expert_bytes(e), "expert bytes");
  }
  return spec;
}

}  // namespace ts

#include "model/synth_model.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf_writer.h"
#include "model/synth_shapes.h"
#include "model/synth_vocab.h"
#include "quant/quantize.h"
#include "quant/row_fallback.h"

namespace ts {
namespace {

constexpr uint64_t kAlignment = 32;          // GGUF's default: no general.alignment key
constexpr uint64_t kChunkBytes = 32u << 20;  // output generated and written per step

// Norm: near 1 (RMS norm weights, dt bias). Bias: near 0 (biases, attention sinks). Matrix: uniform
// with standard deviation 1 / sqrt(row length). RopeFreqs: llama3 divisors. Decay: DeltaNet's A as
// GGUF stores it, -exp(A_log), which must be negative for the recurrent state to decay rather than
// grow. RopeFreqsProportional: Gemma 4's global layers, 1 for a rotated pair and 1e30 for the
// others.
enum class Init { Norm, Bias, Matrix, RopeFreqs, Decay, RopeFreqsProportional };

struct PlannedTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the row
  Init init;
  uint64_t offset = 0;  // in the data section
  uint64_t nbytes = 0;
  uint64_t rows() const {
    uint64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
};

struct Plan {
  const SynthShape* shape = nullptr;
  int64_t layers = 0;
  std::vector<PlannedTensor> tensors;
  uint64_t data_bytes = 0;
  uint64_t params = 0;
};

// llama.cpp's general.file_type (llama_ftype) of a file whose matrices are all `t`.
int64_t file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q2_K:
      return 10;
    case DType::Q3_K:
      return 11;  // Q3_K_S: every matrix q3_k
    case DType::Q4_K:
      return 14;  // Q4_K_S
    case DType::Q5_K:
      return 16;  // Q5_K_S
    case DType::Q6_K:
      return 18;
    case DType::IQ4_NL:
      return 25;
    case DType::IQ4_XS:
      return 30;
    case DType::BF16:
      return 32;
    case DType::MXFP4:
      return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    default:
      fail(ErrorKind::Usage, std::string("--dtype: no GGUF file type for ") + dtype_name(t));
  }
}

// llama_ftype's LLAMA_FTYPE_MOSTLY_Q4_K_M and _Q5_K_M.
constexpr int64_t kFileTypeQ4_K_M = 15, kFileTypeQ5_K_M = 17;

// llama.cpp's use_more_bits(): the first and last eighth of the layers, and every third between.
bool more_bits_layer(int64_t l, int64_t n) {
  return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

// The dtype of one matrix; `more_bits` marks the tensors Q4_K_M / Q5_K_M raise to q6_k in this
// layer, `expert` the routed experts' (MXFP4_MOE's only MXFP4 tensors).
DType matrix_dtype(const SynthOptions& o, bool more_bits, bool expert) {
  if (o.dtype == DType::MXFP4 && !expert) return DType::Q8_0;
  return o.k_m_mix && more_bits ? DType::Q6_K : o.dtype;
}

// A DeepSeek-V3 layer's latent attention, as llama.cpp's converter writes it (kv_b split into
// attn_k_b, transposed, and attn_v_b).
template <class Matrix, class Norm>
void add_mla(const SynthShape& s, const std::string& b, bool more_bits, const Matrix& matrix,
             const Norm& norm) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const uint64_t d = u(s.hidden), H = u(s.heads), nope = u(s.head_dim - s.qk_rope);
  matrix(b + "attn_q_a.weight", {d, u(s.q_lora)});
  norm(b + "attn_q_a_norm.weight", u(s.q_lora));
  matrix(b + "attn_q_b.weight", {u(s.q_lora), H * u(s.head_dim)});
  matrix(b + "attn_kv_a_mqa.weight", {d, u(s.kv_lora + s.qk_rope)});
  norm(b + "attn_kv_a_norm.weight", u(s.kv_lora));
  matrix(b + "attn_k_b.weight", {nope, u(s.kv_lora), H});
  matrix(b + "attn_v_b.weight", {u(s.kv_lora), u(s.v_dim), H}, more_bits);
  matrix(b + "attn_output.weight", {H * u(s.v_dim), d});
}

// Appends one shape's tensors, layer by layer, in the dtypes llama.cpp's quantiser gives them.
class PlanBuilder {
 public:
  PlanBuilder(Plan& p, const SynthOptions& o) : p_(p), o_(o), s_(*p.shape) {}

  void build() {
    const uint64_t d = dim(s_.hidden);
    matrix("token_embd.weight", {d, dim(s_.vocab)}, s_.tied);
    if (s_.gemma4()) return gemma4();
    if (s_.rope_factor > 0)
      p_.tensors.push_back(
          {"rope_freqs.weight", DType::F32, {dim(s_.head_dim) / 2}, Init::RopeFreqs});
    for (int64_t l = 0; l < p_.layers; ++l) layer(l);
    vec("output_norm.weight", d);
    if (!s_.tied) matrix("output.weight", {d, dim(s_.vocab)}, true);
  }

 private:
  static uint64_t dim(int64_t v) { return static_cast<uint64_t>(v); }

  // `more_bits`: a tensor Q4_K_M / Q5_K_M raise to q6_k in this layer.
  void matrix(std::string name, std::vector<uint64_t> dims, bool more_bits = false) {
    p_.tensors.push_back(
        {std::move(name), matrix_dtype(o_, more_bits, false), std::move(dims), Init::Matrix});
  }
  void expert_matrix(std::string name, std::vector<uint64_t> dims, bool more_bits = false) {
    p_.tensors.push_back(
        {std::move(name), matrix_dtype(o_, more_bits, true), std::move(dims), Init::Matrix});
  }
  // Vectors and whatever else llama.cpp's quantiser leaves f32 (1-D tensors, routers, conv taps).
  void f32(std::string name, std::vector<uint64_t> dims, Init init) {
    p_.tensors.push_back({std::move(name), DType::F32, std::move(dims), init});
  }
  void vec(std::string name, uint64_t n, Init init = Init::Norm) {
    f32(std::move(name), {n}, init);
  }

  void layer(int64_t l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool more_bits = more_bits_layer(l, p_.layers);
    vec(b + "attn_norm.weight", dim(s_.hidden));
    if (s_.delta_net_layer(l)) {
      delta_net(b, more_bits);
    } else if (mla()) {
      add_mla(
          s_, b, more_bits,
          [&](std::string n, std::vector<uint64_t> dims, bool more = false) {
            matrix(std::move(n), std::move(dims), more);
          },
          [&](std::string n, uint64_t size) { vec(std::move(n), size); });
    } else {
      attention(b, more_bits);
    }
    // The hybrids', gpt-oss's and GLM's converter names the FFN's norm after the checkpoint's
    // post_attention_layernorm.
    vec(b + (s_.hybrid() || gpt_oss() || glm() ? "post_attention_norm.weight" : "ffn_norm.weight"),
        dim(s_.hidden));
    if (s_.experts == 0 || l < s_.dense_layers) {
      dense_ffn(b, more_bits);
    } else {
      experts(b, more_bits);
    }
  }

  bool mla() const { return std::string(s_.arch) == "deepseek2"; }
  bool gpt_oss() const { return std::string(s_.arch) == "gpt-oss"; }
  bool glm() const { return std::string(s_.arch) == "glm4moe"; }

  // Gemma 4 as llama.cpp's converter writes it: the per-layer embeddings, each layer's own head
  // dim, no k / v where a layer reads an earlier one's rows, sandwich norms, the per-layer input's
  // gate / projection / norm and the layer's output scalar.
  void gemma4() {
    const uint64_t d = dim(s_.hidden), P = dim(s_.ple_dim), L = dim(p_.layers);
    const uint64_t half_global = dim(s_.head_dim_global) / 2;
    if (P > 0) {
      matrix("per_layer_token_embd.weight", {L * P, dim(s_.vocab)});
      matrix("per_layer_model_proj.weight", {d, L * P});
      vec("per_layer_proj_norm.weight", P);
    }
    f32("rope_freqs.weight", {half_global}, Init::RopeFreqsProportional);
    const int64_t first_shared = p_.layers - s_.kv_shared_of(p_.layers);
    for (int64_t l = 0; l < p_.layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      const bool more_bits = more_bits_layer(l, p_.layers);
      const bool global = s_.global_layer(l);
      const uint64_t hd = dim(global ? s_.head_dim_global : s_.head_dim);
      const uint64_t q = dim(s_.heads) * hd, kv = dim(kv_heads(l)) * hd;
      vec(b + "attn_norm.weight", d);
      matrix(b + "attn_q.weight", {d, q});
      vec(b + "attn_q_norm.weight", hd);
      if (l < first_shared) {
        matrix(b + "attn_k.weight", {d, kv});
        if (!(global && s_.k_eq_v)) matrix(b + "attn_v.weight", {d, kv}, more_bits);
        vec(b + "attn_k_norm.weight", hd);
      }
      matrix(b + "attn_output.weight", {q, d});
      vec(b + "post_attention_norm.weight", d);
      vec(b + "ffn_norm.weight", d);
      dense_ffn(b, more_bits);
      vec(b + "post_ffw_norm.weight", d);
      if (s_.experts > 0) {
        // Beside the dense FFN: the routed branch's norms, the router's input scale and the
        // per-expert scale (vectors, f32), the router (f32 as the quantiser leaves it), and the
        // experts' gate and up stacked per expert.
        const uint64_t ff = dim(s_.expert_ffn), e = dim(s_.experts);
        vec(b + "post_ffw_norm_1.weight", d);
        vec(b + "pre_ffw_norm_2.weight", d);
        vec(b + "post_ffw_norm_2.weight", d);
        f32(b + "ffn_gate_inp.weight", {d, e}, Init::Matrix);
        vec(b + "ffn_gate_inp.scale", d);
        vec(b + "ffn_down_exps.scale", e);
        matrix(b + "ffn_gate_up_exps.weight", {d, 2 * ff, e});
        matrix(b + "ffn_down_exps.weight", {ff, d, e}, more_bits);
      }
      if (P > 0) {
        matrix(b + "inp_gate.weight", {d, P});
        matrix(b + "proj.weight", {P, d});
        vec(b + "post_norm.weight", d);
      }
      vec(b + "layer_output_scale.weight", 1);
    }
    vec("output_norm.weight", d);
  }

  int64_t kv_heads(int64_t l) const {
    return s_.global_layer(l) && s_.kv_heads_global > 0 ? s_.kv_heads_global : s_.kv_heads;
  }

  void attention(const std::string& b, bool more_bits) {
    const uint64_t d = dim(s_.hidden), hd = dim(s_.head_dim);
    const uint64_t q = dim(s_.heads) * hd, kv = dim(s_.kv_heads) * hd;
    // A gated attention's q projection also yields the output gate: head_dim more rows per head.
    matrix(b + "attn_q.weight", {d, s_.hybrid() ? 2 * q : q});
    matrix(b + "attn_k.weight", {d, kv});
    matrix(b + "attn_v.weight", {d, kv}, more_bits);
    matrix(b + "attn_output.weight", {q, d});
    if (gpt_oss()) {  // biases on q, k, v and o; a sink logit per head
      vec(b + "attn_q.bias", q, Init::Bias);
      vec(b + "attn_k.bias", kv, Init::Bias);
      vec(b + "attn_v.bias", kv, Init::Bias);
      vec(b + "attn_output.bias", d, Init::Bias);
      vec(b + "attn_sinks.weight", dim(s_.heads), Init::Bias);
    } else if (glm()) {  // GLM-4.5-Air: biases on q, k and v, no q/k norm
      vec(b + "attn_q.bias", q, Init::Bias);
      vec(b + "attn_k.bias", kv, Init::Bias);
      vec(b + "attn_v.bias", kv, Init::Bias);
    } else if (std::string(s_.arch) != "llama") {
      vec(b + "attn_q_norm.weight", hd);
      vec(b + "attn_k_norm.weight", hd);
    }
  }

  // llama.cpp's quantiser counts attn_qkv as attn_v (raised in the same layers) and quantises the
  // 2-D alpha / beta projections like any matrix, but leaves the conv taps f32.
  void delta_net(const std::string& b, bool more_bits) {
    const uint64_t d = dim(s_.hidden), nv = dim(s_.dn_v_heads);
    const uint64_t value = nv * dim(s_.dn_v_dim);
    const uint64_t channels = 2 * dim(s_.dn_k_heads) * dim(s_.dn_k_dim) + value;
    matrix(b + "attn_qkv.weight", {d, channels}, more_bits);
    matrix(b + "attn_gate.weight", {d, value});
    if (std::string(s_.arch) == "qwen3next") {
      matrix(b + "ssm_ba.weight", {d, 2 * nv});
    } else {
      matrix(b + "ssm_alpha.weight", {d, nv});
      matrix(b + "ssm_beta.weight", {d, nv});
    }
    f32(b + "ssm_conv1d.weight", {dim(s_.dn_conv), channels}, Init::Matrix);
    vec(b + "ssm_a", nv, Init::Decay);
    vec(b + "ssm_dt.bias", nv);
    vec(b + "ssm_norm.weight", dim(s_.dn_v_dim));
    matrix(b + "ssm_out.weight", {value, d});
  }

  void dense_ffn(const std::string& b, bool more_bits) {
    const uint64_t d = dim(s_.hidden), ff = dim(s_.ffn);
    matrix(b + "ffn_gate.weight", {d, ff});
    matrix(b + "ffn_up.weight", {d, ff});
    matrix(b + "ffn_down.weight", {ff, d}, more_bits);
  }

  void experts(const std::string& b, bool more_bits) {
    const uint64_t d = dim(s_.hidden), ff = dim(s_.expert_ffn), e = dim(s_.experts);
    // The routers stay f32, as llama.cpp's quantiser leaves them.
    f32(b + "ffn_gate_inp.weight", {d, e}, Init::Matrix);
    expert_matrix(b + "ffn_gate_exps.weight", {d, ff, e});
    expert_matrix(b + "ffn_up_exps.weight", {d, ff, e});
    expert_matrix(b + "ffn_down_exps.weight", {ff, d, e}, more_bits);
    if (gpt_oss()) {  // biases on the router and on each expert's projections
      vec(b + "ffn_gate_inp.bias", e, Init::Bias);
      f32(b + "ffn_gate_exps.bias", {ff, e}, Init::Bias);
      f32(b + "ffn_up_exps.bias", {ff, e}, Init::Bias);
      f32(b + "ffn_down_exps.bias", {d, e}, Init::Bias);
    }
    // DeepSeek's (and GLM's) selection bias stays f32 (a vector); its shared experts are one GLU.
    const bool deepseek_routing = mla() || glm();
    if (deepseek_routing) vec(b + "exp_probs_b.bias", e);
    const uint64_t sh =
        deepseek_routing ? dim(s_.shared_experts * s_.expert_ffn) : dim(s_.shared_ffn);
    if (sh == 0) return;
    matrix(b + "ffn_gate_shexp.weight", {d, sh});
    matrix(b + "ffn_up_shexp.weight", {d, sh});
    // Its name holds "ffn_down", which is what the quantiser's rule matches.
    matrix(b + "ffn_down_shexp.weight", {sh, d}, more_bits);
    // The hybrids gate theirs; the quantiser counts [d, 1] as 1-D (trailing ones dropped), so the
    // gate stays f32.
    if (s_.hybrid()) f32(b + "ffn_gate_inp_shexp.weight", {d, 1}, Init::Matrix);
  }

  Plan& p_;
  const SynthOptions& o_;
  const SynthShape& s_;
};

// Offsets in the data section, sizes and the parameter count. A row that is not whole blocks of
// its dtype takes the type llama.cpp's quantiser would (DeepSeek's 128-wide attn_k_b in q4_k_m:
// q5_0).
void place_tensors(Plan& p) {
  for (PlannedTensor& t : p.tensors) {
    const std::string what = std::string("shape ") + p.shape->name + ": tensor '" + t.name + "'";
    t.dtype = row_fallback_dtype(t.dtype, t.dims[0]);
    t.nbytes = checked_mul(row_bytes(t.dtype, t.dims[0], what), t.rows(), what);
    t.offset = p.data_bytes;
    p.data_bytes = align_up(checked_add(p.data_bytes, t.nbytes, what), kAlignment, what);
    p.params += t.dims[0] * t.rows();
  }
}

Plan make_plan(const SynthOptions& o) {
  Plan p;
  p.shape = &find_synth_shape(o.shape);
  const SynthShape& s = *p.shape;
  if (o.k_m_mix && o.dtype != DType::Q4_K && o.dtype != DType::Q5_K)
    fail(ErrorKind::Usage, std::string("--dtype: there is no K_M mix over ") + dtype_name(o.dtype));
  if (!can_quantize_weights(o.dtype))
    fail(ErrorKind::Usage, std::string("--dtype: ") + dtype_name(o.dtype) +
                               " is not a weight type this build can write");
  if (o.layers < 0 || o.layers > s.layers)
    fail(ErrorKind::Usage, "--layers: " + std::to_string(o.layers) + " is outside 1.." +
                               std::to_string(s.layers) + " for shape " + s.name);
  p.layers = o.layers == 0 ? s.layers : o.layers;
  PlanBuilder(p, o).build();
  place_tensors(p);
  return p;
}

GgufValue int_array(GgufType elem, std::vector<int64_t> values) {
  GgufArray a;
  a.elem = elem;
  a.ints = std::move(values);
  return gguf_array(std::move(a));
}

// The keys llama.cpp's converter writes for qwen3next / qwen35 / qwen35moe.
void add_hybrid_metadata(GgufWriter& w, const Plan& p) {
  const SynthShape& s = *p.shape;
  const std::string a = s.arch;
  auto u32 = [&](const std::string& key, int64_t v) {
    w.add_kv(a + "." + key, gguf_int(GgufType::U32, v));
  };
  u32("ssm.conv_kernel", s.dn_conv);
  u32("ssm.state_size", s.dn_k_dim);
  u32("ssm.group_count", s.dn_k_heads);
  u32("ssm.time_step_rank", s.dn_v_heads);
  u32("ssm.inner_size", s.dn_v_heads * s.dn_v_dim);
  u32("full_attention_interval", s.full_attention_interval);
  u32("rope.dimension_count", s.rotary_dim);
  if (a == "qwen3next") return;
  std::vector<int64_t> recurrent;
  for (int64_t l = 0; l < p.layers; ++l) recurrent.push_back(s.delta_net_layer(l) ? 1 : 0);
  w.add_kv(a + ".attention.recurrent_layers", int_array(GgufType::Bool, std::move(recurrent)));
  w.add_kv(
      a + ".rope.dimension_sections",
      int_array(GgufType::I32, {s.mrope_sections[0], s.mrope_sections[1], s.mrope_sections[2], 0}));
}

void add_metadata(GgufWriter& w, const Plan& p, const SynthOptions& o) {
  const SynthShape& s = *p.shape;
  const std::string a = s.arch;
  auto u32 = [&](const std::string& key, int64_t v) {
    w.add_kv(a + "." + key, gguf_int(GgufType::U32, v));
  };
  auto f32 = [&](const std::string& key, double v) {
    w.add_kv(a + "." + key, gguf_float(GgufType::F32, v));
  };
  w.add_kv("general.architecture", gguf_string(a));
  w.add_kv("general.type", gguf_string("model"));
  w.add_kv("general.name", gguf_string(std::string("synthetic ") + s.name));
  w.add_kv("general.description",
           gguf_string(std::string("random weights in the shape of ") + s.model +
                       " (turbospark synth, seed " + std::to_string(o.seed) + ", " +
                       std::to_string(p.layers) + " of " + std::to_string(s.layers) + " layers)"));
  w.add_kv("general.file_type",
           gguf_int(GgufType::U32, !o.k_m_mix               ? file_type(o.dtype)
                                   : o.dtype == DType::Q4_K ? kFileTypeQ4_K_M
                                                            : kFileTypeQ5_K_M));
  w.add_kv("general.quantization_version", gguf_int(GgufType::U32, 2));
  u32("vocab_size", s.vocab);
  u32("context_length", s.ctx);
  u32("embedding_length", s.hidden);
  u32("block_count", p.layers);
  // qwen35moe's checkpoints state no dense width, so its converter writes none.
  if (s.ffn > 0) u32("feed_forward_length", s.ffn);
  u32("attention.head_count", s.heads);
  if (!s.gemma4() || s.kv_heads_global == 0) u32("attention.head_count_kv", s.kv_heads);
  if (!s.gemma4()) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.v_dim > 0 ? s.v_dim : s.head_dim);
  }
  f32("rope.freq_base", s.rope_theta);
  f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  if (a == "llama") u32("rope.dimension_count", s.head_dim);
  if (s.experts > 0) {
    u32("expert_count", s.experts);
    u32("expert_used_count", s.experts_used);
    if (a != "llama") u32("expert_feed_forward_length", s.expert_ffn);
    if (s.shared_ffn > 0) u32("expert_shared_feed_forward_length", s.shared_ffn);
  }
  if (s.hybrid()) add_hybrid_metadata(w, p);
  if (s.gemma4()) {
    std::vector<int64_t> pattern;
    for (int64_t l = 0; l < p.layers; ++l) pattern.push_back(s.global_layer(l) ? 0 : 1);
    w.add_kv(a + ".attention.sliding_window_pattern",
             int_array(GgufType::Bool, std::move(pattern)));
    u32("attention.key_length", s.head_dim_global);
    u32("attention.value_length", s.head_dim_global);
    u32("attention.key_length_swa", s.head_dim);
    u32("attention.value_length_swa", s.head_dim);
    u32("rope.dimension_count", s.head_dim_global);
    u32("rope.dimension_count_swa", s.head_dim);
    f32("rope.freq_base_swa", s.rope_theta_swa);
    u32("attention.sliding_window", s.sliding_window);
    u32("attention.shared_kv_layers", s.kv_shared_of(p.layers));
    u32("embedding_length_per_layer_input", s.ple_dim);
    if (s.kv_heads_global > 0) {
      std::vector<int64_t> kv;
      for (int64_t l = 0; l < p.layers; ++l)
        kv.push_back(s.global_layer(l) ? s.kv_heads_global : s.kv_heads);
      w.add_kv(a + ".attention.head_count_kv", int_array(GgufType::U32, std::move(kv)));
    }
    f32("final_logit_softcapping", s.final_softcap);
  }
  if (a == "deepseek2" || a == "glm4moe") {  // DeepSeek's routing (GLM-4.5 took it over)
    // A file cut to fewer layers than the shape's dense ones holds dense layers only.
    u32("leading_dense_block_count", std::min(s.dense_layers, p.layers));
    u32("expert_shared_count", s.shared_experts);
    u32("expert_group_count", s.expert_groups);
    u32("expert_group_used_count", s.expert_groups_used);
    u32("expert_gating_func", 2);  // sigmoid
    f32("expert_weights_scale", s.routed_scale);
    w.add_kv(a + ".expert_weights_norm", gguf_int(GgufType::Bool, 1));
  }
  if (a == "glm4moe") u32("rope.dimension_count", s.rotary_dim);
  if (a == "deepseek2") {
    u32("attention.q_lora_rank", s.q_lora);
    u32("attention.kv_lora_rank", s.kv_lora);
    u32("attention.key_length_mla", s.head_dim);
    u32("attention.value_length_mla", s.v_dim);
    u32("rope.dimension_count", s.qk_rope);
    w.add_kv(a + ".rope.scaling.type", gguf_string("yarn"));
    f32("rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
    f32("rope.scaling.yarn_log_multiplier", 0.1);  // 0.1 x mscale_all_dim, as the converter
  }
  if (a == "gpt-oss") {  // the converter writes no layer pattern: every other layer slides
    u32("attention.sliding_window", s.sliding_window);
    w.add_kv(a + ".rope.scaling.type", gguf_string("yarn"));
    f32("rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
    f32("rope.scaling.yarn_beta_fast", 32.0);
    f32("rope.scaling.yarn_beta_slow", 1.0);
  }
  add_synth_vocab(w, s.vocab);
}

// Metadata and tensor infos, padded to where the data section starts.
std::vector<uint8_t> header_bytes(const Plan& p, const SynthOptions& o) {
  GgufWriter w;
  add_metadata(w, p, o);
  for (const PlannedTensor& t : p.tensors)
    w.add_raw_tensor_info(t.name, static_cast<uint32_t>(t.dtype), t.dims, t.offset);
  return w.bytes();
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Seeded by the tensor's name rather than its position, so a file cut to N layers holds exactly
// the first N layers of the full-depth file.
uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return mix64(mix64(seed + kGolden) ^ h);
}

// Uniform values in (-1, 1), two per 64-bit draw of a splitmix64 stream seeded per row.
void uniform_row(uint64_t tseed, uint64_t row, float* out, uint64_t n) {
  uint64_t state = mix64(tseed + row * kGolden);
  constexpr float kScale = 2.0f / 16777216.0f;
  for (uint64_t i = 0; i < n; i += 2) {
    state += kGolden;
    const uint64_t r = mix64(state);
    out[i] = (static_cast<float>(r >> 40) + 0.5f) * kScale - 1.0f;
    if (i + 1 < n) out[i + 1] = (static_cast<float>((r >> 16) & 0xFFFFFF) + 0.5f) * kScale - 1.0f;
  }
}

// llama3 rope scaling as GGUF states it: one divisor per rotary frequency (model/model_spec.cpp).
void rope_divisors(const SynthShape& s, float* out) {
  const int64_t half = s.head_dim / 2;
  const double old_ctx = static_cast<double>(s.rope_orig_ctx);
  for (int64_t i = 0; i < half; ++i) {
    const double freq =
        std::pow(s.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(s.head_dim));
    const double wavelen = 2.0 * M_PI / freq;
    double div = 1.0;
    if (wavelen > old_ctx / s.rope_low_freq) {
      div = s.rope_factor;
    } else if (wavelen >= old_ctx / s.rope_high_freq) {
      const double smooth =
          (old_ctx / wavelen - s.rope_low_freq) / (s.rope_high_freq - s.rope_low_freq);
      div = 1.0 / ((1.0 - smooth) / s.rope_factor + smooth);
    }
    out[i] = static_cast<float>(div);
  }
}

void fill_row(const Plan& p, const PlannedTensor& t, uint64_t tseed, uint64_t row, float* out) {
  const uint64_t n = t.dims[0];
  if (t.init == Init::RopeFreqs) return rope_divisors(*p.shape, out);
  if (t.init == Init::RopeFreqsProportional) {
    // transformers: int(partial_rotary_factor * head_dim // 2) of the n = head_dim / 2 pairs.
    const auto rotated = static_cast<uint64_t>(p.shape->partial_global * static_cast<double>(n));
    for (uint64_t i = 0; i < n; ++i) out[i] = i < rotated ? 1.0f : 1e30f;
    return;
  }
  uniform_row(tseed, row, out, n);
  if (t.init == Init::Norm) {
    for (uint64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * out[i];
    return;
  }
  if (t.init == Init::Decay) {
    for (uint64_t i = 0; i < n; ++i) out[i] = -std::exp(out[i]);
    return;
  }
  if (t.init == Init::Bias) {
    for (uint64_t i = 0; i < n; ++i) out[i] *= 0.05f;
    return;
  }
  // Uniform on (-a, a) has standard deviation a / sqrt(3).
  const float a = std::sqrt(3.0f / static_cast<float>(n));
  for (uint64_t i = 0; i < n; ++i) out[i] *= a;
}

void write_all(int fd, const void* data, uint64_t n, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      fail(ErrorKind::Runtime, path + ": write failed: " + std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void check_free_space(const std::string& path, uint64_t need) {
  std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0)
    fail(ErrorKind::Usage, dir.string() + ": cannot check free space: " + std::strerror(errno));
  const uint64_t avail = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (avail < need) {
    char msg[256];
    std::snprintf(msg, sizeof msg, ": the model needs %.2f GB but only %.2f GB is free on %s",
                  need / 1e9, avail / 1e9, dir.c_str());
    fail(ErrorKind::Usage, path + msg);
  }
}

class FileGuard {
 public:
  explicit FileGuard(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(ErrorKind::Usage, path_ + ": cannot create: " + std::strerror(errno));
  }
  ~FileGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!kept_) std::remove(path_.c_str());
  }
  int fd() const { return fd_; }
  void commit(const std::string& final_path) {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      fail(ErrorKind::Runtime, path_ + ": cannot flush: " + std::strerror(errno));
    }
    fd_ = -1;
    if (std::rename(path_.c_str(), final_path.c_str()) != 0)
      fail(ErrorKind::Runtime,
           final_path + ": cannot rename from " + path_ + ": " + std::strerror(errno));
    kept_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool kept_ = false;
};

}  // namespace

SynthSummary plan_synth_model(const SynthOptions& o) {
  const Plan p = make_plan(o);
  return {header_bytes(p, o).size() + p.data_bytes, p.params,
          static_cast<int64_t>(p.tensors.size()), p.layers};
}

SynthSummary write_synth_model(const SynthOptions& o, const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress) {
  const Plan p = make_plan(o);
  const std::vector<uint8_t> header = header_bytes(p, o);
  const uint64_t total = header.size() + p.data_bytes;
  check_free_space(path, total);

  FileGuard file(path + ".part");
  write_all(file.fd(), header.data(), header.size(), 0, path);
  ThreadPool pool(o.threads > 0 ? o.threads : physical_cores());
  std::vector<uint8_t> chunk;
  uint64_t done = header.size();
  for (const PlannedTensor& t : p.tensors) {
    const uint64_t row_len = t.dims[0], rb = t.nbytes / t.rows();
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / rb);
    const uint64_t tseed = tensor_seed(o.seed, t.name);
    for (uint64_t r0 = 0; r0 < t.rows(); r0 += rows_per_chunk) {
      const uint64_t nr = std::min(rows_per_chunk, t.rows() - r0);
      chunk.resize(nr * rb);
      pool.parallel_for(static_cast<int64_t>(nr), [&](int64_t begin, int64_t end) {
        std::vector<float> row(row_len);
        for (int64_t r = begin; r < end; ++r) {
          fill_row(p, t, tseed, r0 + static_cast<uint64_t>(r), row.data());
          quantize_row_weights(t.dtype, row.data(), chunk.data() + static_cast<uint64_t>(r) * rb,
                               static_cast<int64_t>(row_len));
        }
      });
      write_all(file.fd(), chunk.data(), chunk.size(), header.size() + t.offset + r0 * rb, path);
      done += chunk.size();
      if (progress) progress(done, total);
    }
  }
  // Padding after the last tensor, so the data section has the size the offsets imply.
  if (::ftruncate(file.fd(), static_cast<off_t>(total)) != 0)
    fail(ErrorKind::Runtime, path + ": cannot size the file: " + std::strerror(errno));
  file.commit(path);
  if (progress) progress(total, total);
  return {total, p.params, static_cast<int64_t>(p.tensors.size()), p.layers};
}

}  // namespace ts

#include "vision/gemma4_vision.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "backend/cpu/host_ops.h"
#include "core/error.h"
#include "model/config_view.h"
#include "quant/dequant.h"
#include "vision/image_decode.h"
#include "vision/tower_checks.h"

namespace ts {
namespace {

constexpr const char* kTower = "Gemma 4 vision";

void read_gguf(const ModelSource& s, Gemma4VisionConfig& c) {
  const ConfigView v(s, nullptr);
  c.hidden = v.req_int("vision.embedding_length", nullptr);
  c.heads = v.req_int("vision.attention.head_count", nullptr);
  c.depth = v.req_int("vision.block_count", nullptr);
  c.ff = v.req_int("vision.feed_forward_length", nullptr);
  c.patch = v.req_int("vision.patch_size", nullptr);
  c.out_hidden = v.req_int("vision.projection_dim", nullptr);
  // The converter writes the pooling only where it is not Gemma 4's 3, and neither the head
  // width (the q norm's) nor the rotary base (Gemma 4's 100).
  c.pool = v.opt_int("vision.projector.scale_factor", nullptr).value_or(3);
  const auto qn = s.find("v.blk.0.attn_q_norm.weight");
  c.head_dim = qn && qn->dims.size() == 1 ? static_cast<int64_t>(qn->dims[0]) : 0;
  c.eps = static_cast<float>(
      v.opt_float("vision.attention.layer_norm_epsilon", nullptr).value_or(1e-6));
}

// The processor's settings, in preprocessor_config.json beside config.json.
void read_preprocessor(const ModelSource& s, Gemma4VisionConfig& c) {
  const std::string where = s.path() + "/preprocessor_config.json";
  std::ifstream in(where);
  if (!in) return;
  const auto pre = nlohmann::json::parse(in, nullptr, false);
  if (!pre.is_object()) fail(ErrorKind::Model, where + ": not a JSON object");
  const auto integer = [&](const char* key, int64_t& dst) {
    auto it = pre.find(key);
    if (it == pre.end()) return;
    if (!it->is_number_integer() || it->get<int64_t>() <= 0)
      fail(ErrorKind::Model, where + ": '" + key + "': expected a positive integer");
    dst = it->get<int64_t>();
  };
  int64_t patch = c.patch, pool = c.pool;
  integer("patch_size", patch);
  integer("pooling_kernel_size", pool);
  integer("max_soft_tokens", c.max_soft_tokens);
  if (patch != c.patch || pool != c.pool)
    fail(ErrorKind::Model, where + ": patch_size / pooling_kernel_size differ from config.json's");
  if (auto it = pre.find("rescale_factor"); it != pre.end() && it->is_number())
    c.rescale = it->get<double>();
  if (pre.value("do_normalize", false))
    fail(ErrorKind::Unsupported, where +
                                     ": 'do_normalize' true is not supported (Gemma 4's "
                                     "processor does not normalise)");
}

void read_hf(const ModelSource& s, Gemma4VisionConfig& c) {
  const ConfigView v(s, "vision_config");
  if (v.hf_value("/vision_config") == nullptr)
    fail(ErrorKind::Model, s.path() + "/config.json: no vision_config (not a vision model)");
  c.hidden = v.req_int(nullptr, "hidden_size");
  c.heads = v.req_int(nullptr, "num_attention_heads");
  c.head_dim = v.opt_int(nullptr, "head_dim").value_or(c.heads > 0 ? c.hidden / c.heads : 0);
  c.depth = v.req_int(nullptr, "num_hidden_layers");
  c.ff = v.req_int(nullptr, "intermediate_size");
  c.patch = v.req_int(nullptr, "patch_size");
  c.pool = v.opt_int(nullptr, "pooling_kernel_size").value_or(3);
  c.eps = static_cast<float>(v.opt_float(nullptr, "rms_norm_eps").value_or(1e-6));
  c.rope_theta =
      static_cast<float>(v.opt_float(nullptr, "rope_parameters/rope_theta").value_or(100.0));
  if (v.opt_int(nullptr, "num_key_value_heads").value_or(c.heads) != c.heads)
    v.invalid("vision_config/num_key_value_heads", "grouped heads are not supported");
  const std::string act = v.opt_string(nullptr, "hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    v.invalid("vision_config/hidden_activation", "'" + act + "' is not supported");
  const nlohmann::json* width = v.hf_value("/text_config/hidden_size");
  if (width == nullptr || !width->is_number_integer())
    v.missing(nullptr, "text_config/hidden_size");
  c.out_hidden = width->get<int64_t>();
  read_preprocessor(s, c);
}

void check(const ModelSource& s, const Gemma4VisionConfig& c) {
  const auto in = [&](const char* what, int64_t x, int64_t lo, int64_t hi) {
    check_range(s, kTower, what, x, lo, hi);
  };
  in("hidden size", c.hidden, 1, 1 << 16);
  in("heads", c.heads, 1, 1024);
  in("head width", c.head_dim, 4, 1024);
  in("blocks", c.depth, 1, 1024);
  in("MLP width", c.ff, 1, 1 << 18);
  in("patch size", c.patch, 1, 1024);
  in("pooling", c.pool, 1, 64);
  in("projection width", c.out_hidden, 1, 1 << 20);
  in("max_soft_tokens", c.max_soft_tokens, 1, 1 << 16);
  // The 2-D rotary splits each head in two halves of NeoX pairs.
  if (c.head_dim % 4 != 0)
    fail(ErrorKind::Model, s.path() + ": " + kTower + " head width " + std::to_string(c.head_dim) +
                               " is not a multiple of 4");
}

}  // namespace

Gemma4Vision::~Gemma4Vision() = default;

std::unique_ptr<Gemma4Vision> Gemma4Vision::open(const std::string& path, int threads) {
  std::unique_ptr<Gemma4Vision> v(new Gemma4Vision());
  v->source_ = ModelSource::open(path);
  if (v->source_->gguf() != nullptr) {
    require_projector(*v->source_, "gemma4v", "Gemma 4");
    read_gguf(*v->source_, v->c_);
  } else {
    read_hf(*v->source_, v->c_);
  }
  check(*v->source_, v->c_);
  v->start(threads, kTower);
  v->load();
  return v;
}

Gemma4Vision::Linear Gemma4Vision::linear(const std::string& base, const std::string& weight,
                                          int64_t in, int64_t out) {
  const TensorRef t = w_->need(weight, {in, out});
  Linear l;
  l.w = cpu_->upload_weight(t.dtype, out, in, t.nbytes / static_cast<uint64_t>(out), t.data());
  // transformers keeps each clamp as a scalar, the converter as a 1-element vector.
  const auto bound = [&](const char* key, float missing) {
    const auto b = source_->find(base + key);
    if (!b) return missing;
    uint64_t n = 1;
    for (uint64_t d : b->dims) n *= d;
    if (n != 1 || (b->dtype != DType::F32 && b->dtype != DType::F16 && b->dtype != DType::BF16))
      fail(ErrorKind::Model, path() + ": tensor '" + base + key + "' is not one float");
    float x = 0;
    dequantize_row(b->dtype, b->data(), &x, 1);
    return x;
  };
  constexpr float inf = std::numeric_limits<float>::infinity();
  l.in_lo = bound(".input_min", -inf);
  l.in_hi = bound(".input_max", inf);
  l.out_lo = bound(".output_min", -inf);
  l.out_hi = bound(".output_max", inf);
  return l;
}

void Gemma4Vision::load() {
  const bool gguf = source_->gguf() != nullptr;
  const int64_t H = c_.hidden, A = c_.heads * c_.head_dim, P = c_.patch;
  v_ = "v.";
  mm_ = "mm.";
  if (!gguf) {
    const bool top = source_->find("model.vision_tower.patch_embedder.input_proj.weight") ||
                     !source_->find("vision_tower.patch_embedder.input_proj.weight");
    v_ = top ? "model.vision_tower." : "vision_tower.";
    mm_ = top ? "model.embed_vision." : "embed_vision.";
  }
  // The patch embedding, its columns in the processor's order (row, column, channel); the
  // converter stores it as a convolution's (channel, row, column).
  std::vector<float>& pw = patch_host_;
  if (gguf) {
    const std::vector<float> conv = w_->floats(v_ + "patch_embd.weight", {P, P, 3, H});
    pw.resize(conv.size());
    for (int64_t o = 0; o < H; ++o)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t i = 0; i < P * P; ++i)
          pw[static_cast<size_t>(o * 3 * P * P + i * 3 + ch)] =
              conv[static_cast<size_t>(o * 3 * P * P + ch * P * P + i)];
  } else {
    pw = w_->floats(v_ + "patch_embedder.input_proj.weight", {c_.patch_values(), H});
  }
  patch_ = cpu_->upload_weight(DType::F32, H, c_.patch_values(),
                               static_cast<size_t>(c_.patch_values()) * sizeof(float), pw.data());
  const std::string pos_name =
      v_ + (gguf ? "position_embd.weight" : "patch_embedder.position_embedding_table");
  const auto pos = source_->find(pos_name);
  c_.pos_size = pos && pos->dims.size() == 3 ? static_cast<int64_t>(pos->dims[1]) : 0;
  pos_table_ = w_->floats(pos_name, {H, c_.pos_size, 2});
  for (int64_t l = 0; l < c_.depth; ++l) {
    const std::string g = v_ + "blk." + std::to_string(l) + ".",
                      h = v_ + "encoder.layers." + std::to_string(l) + ".";
    const auto norm = [&](const char* gn, const char* hn, int64_t n) {
      return w_->floats(gguf ? g + gn + ".weight" : h + hn + ".weight", {n});
    };
    const auto lin = [&](const char* gn, const char* hn, int64_t in, int64_t out) {
      const std::string base = gguf ? g + gn : h + hn;
      return linear(base, base + (gguf ? ".weight" : ".linear.weight"), in, out);
    };
    Block b;
    b.norm_in = norm("ln1", "input_layernorm", H);
    b.norm_post_attn = norm("attn_post_norm", "post_attention_layernorm", H);
    b.norm_pre_ffn = norm("ln2", "pre_feedforward_layernorm", H);
    b.norm_post_ffn = norm("ffn_post_norm", "post_feedforward_layernorm", H);
    b.q_norm = norm("attn_q_norm", "self_attn.q_norm", c_.head_dim);
    b.k_norm = norm("attn_k_norm", "self_attn.k_norm", c_.head_dim);
    b.q = lin("attn_q", "self_attn.q_proj", H, A);
    b.k = lin("attn_k", "self_attn.k_proj", H, A);
    b.v = lin("attn_v", "self_attn.v_proj", H, A);
    b.o = lin("attn_out", "self_attn.o_proj", A, H);
    b.gate = lin("ffn_gate", "mlp.gate_proj", H, c_.ff);
    b.up = lin("ffn_up", "mlp.up_proj", H, c_.ff);
    b.down = lin("ffn_down", "mlp.down_proj", c_.ff, H);
    blocks_.push_back(std::move(b));
  }
  // Standardisation where the checkpoint has it (config's `standardize`).
  if (source_->find(v_ + "std_bias") || source_->find(v_ + "std_scale")) {
    std_bias_ = w_->floats(v_ + "std_bias", {H});
    std_scale_ = w_->floats(v_ + "std_scale", {H});
  }
  ones_.assign(static_cast<size_t>(std::max(H, c_.head_dim)), 1.0f);
  const TensorRef pj = w_->need(
      mm_ + (gguf ? "input_projection.weight" : "embedding_projection.weight"), {H, c_.out_hidden});
  proj_ = cpu_->upload_weight(pj.dtype, c_.out_hidden, H,
                              pj.nbytes / static_cast<uint64_t>(c_.out_hidden), pj.data());
}

void Gemma4Vision::apply(const Linear& l, const float* x, int64_t rows, float* y) {
  const int64_t n = rows * l.w.cols;
  if (std::isfinite(l.in_lo) || std::isfinite(l.in_hi)) {
    clamped_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      clamped_[static_cast<size_t>(i)] = std::clamp(x[i], l.in_lo, l.in_hi);
    x = clamped_.data();
  }
  cpu_->matmul(l.w, x, rows, y);
  if (std::isfinite(l.out_lo) || std::isfinite(l.out_hi))
    for (int64_t i = 0; i < rows * l.w.rows; ++i) y[i] = std::clamp(y[i], l.out_lo, l.out_hi);
}

// Each head's first half rotates by the patch's column, its second by its row: NeoX pairs
// (i, i + head_dim / 4) within each half; cos and sin are [rows][2][head_dim / 4].
void Gemma4Vision::rope(float* x, const std::vector<float>& cos, const std::vector<float>& sin,
                        int64_t rows) {
  const int64_t D = c_.head_dim, q = D / 4;
  pool_->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t h = 0; h < c_.heads; ++h)
        for (int64_t half = 0; half < 2; ++half) {
          float* p = x + (r * c_.heads + h) * D + half * 2 * q;
          const float* cs = cos.data() + (r * 2 + half) * q;
          const float* sn = sin.data() + (r * 2 + half) * q;
          for (int64_t i = 0; i < q; ++i) {
            const float a = p[i], b = p[i + q];
            p[i] = a * cs[i] - b * sn[i];
            p[i + q] = b * cs[i] + a * sn[i];
          }
        }
  });
}

std::vector<float> Gemma4Vision::tower(const ImagePatches& p) {
  const int64_t H = c_.hidden, D = c_.head_dim, A = c_.heads * D, k = c_.pool;
  const int64_t gh = p.grid_h, gw = p.grid_w, N = gh * gw;
  if (gh <= 0 || gw <= 0 || gh % k != 0 || gw % k != 0 ||
      static_cast<int64_t>(p.values.size()) != N * c_.patch_values())
    fail(ErrorKind::Input, "a Gemma 4 image of " + std::to_string(gh) + " x " + std::to_string(gw) +
                               " patches that do not pool by " + std::to_string(k));
  if (gh > c_.pos_size || gw > c_.pos_size)
    fail(ErrorKind::Input, "a Gemma 4 image of " + std::to_string(gh) + " x " + std::to_string(gw) +
                               " patches: the position tables hold " + std::to_string(c_.pos_size) +
                               " a side");
  std::vector<float> in(p.values.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = 2.0f * (p.values[i] - 0.5f);
  std::vector<float> x(static_cast<size_t>(N * H));
  cpu_->matmul(patch_, in.data(), N, x.data());
  // transformers' axial rotary: head_dim / 4 frequencies base^(-2i / (head_dim / 2)), once by
  // the column and once by the row; angles in float as it computes them.
  const int64_t q4 = D / 4;
  std::vector<float> inv(static_cast<size_t>(q4));
  for (int64_t i = 0; i < q4; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(
        1.0 /
        std::pow(static_cast<double>(c_.rope_theta),
                 static_cast<double>(static_cast<float>(2 * i) / static_cast<float>(2 * q4))));
  std::vector<float> cos(static_cast<size_t>(N * 2 * q4)), sin(cos.size());
  for (int64_t n = 0; n < N; ++n) {
    const int64_t at[2] = {n % gw, n / gw};  // x, y
    float* xn = x.data() + n * H;
    for (int s = 0; s < 2; ++s) {
      const float* e = pos_table_.data() + (s * c_.pos_size + at[s]) * H;
      for (int64_t d = 0; d < H; ++d) xn[d] += e[d];
      for (int64_t i = 0; i < q4; ++i) {
        const float angle = static_cast<float>(at[s]) * inv[static_cast<size_t>(i)];
        cos[static_cast<size_t>((n * 2 + s) * q4 + i)] = std::cos(angle);
        sin[static_cast<size_t>((n * 2 + s) * q4 + i)] = std::sin(angle);
      }
    }
  }
  std::vector<float> h(x.size()), q(static_cast<size_t>(N * A)), kk(q.size()), v(q.size()),
      att(q.size()), gate(static_cast<size_t>(N * c_.ff)), up(gate.size());
  for (const Block& B : blocks_) {
    cpu_->rms_norm(x.data(), B.norm_in.data(), N, H, c_.eps, false, h.data());
    apply(B.q, h.data(), N, q.data());
    apply(B.k, h.data(), N, kk.data());
    apply(B.v, h.data(), N, v.data());
    cpu_->rms_norm_heads(q.data(), B.q_norm.data(), N, c_.heads, D, c_.eps, false);
    cpu_->rms_norm_heads(kk.data(), B.k_norm.data(), N, c_.heads, D, c_.eps, false);
    cpu_->rms_norm_heads(v.data(), ones_.data(), N, c_.heads, D, c_.eps, false);
    rope(q.data(), cos, sin, N);
    rope(kk.data(), cos, sin, N);
    full_attention(*cpu_, q.data(), kk.data(), v.data(), N, c_.heads, D, 1.0f, att.data());
    apply(B.o, att.data(), N, h.data());
    cpu_->rms_norm(h.data(), B.norm_post_attn.data(), N, H, c_.eps, false, h.data());
    cpu_->add(x.data(), h.data(), N * H);
    cpu_->rms_norm(x.data(), B.norm_pre_ffn.data(), N, H, c_.eps, false, h.data());
    apply(B.gate, h.data(), N, gate.data());
    apply(B.up, h.data(), N, up.data());
    cpu_->glu(Glu::GeluTanh, gate.data(), up.data(), N, c_.ff, c_.ff, gate.data());
    apply(B.down, gate.data(), N, h.data());
    cpu_->rms_norm(h.data(), B.norm_post_ffn.data(), N, H, c_.eps, false, h.data());
    cpu_->add(x.data(), h.data(), N * H);
  }
  // The pooler: each k x k window's mean (row-major over the windows) times sqrt(hidden).
  const int64_t tw = gw / k, T = (gh / k) * tw;
  std::vector<float> out(static_cast<size_t>(T * H), 0.0f);
  const float inv_k2 = 1.0f / static_cast<float>(k * k);
  for (int64_t n = 0; n < N; ++n) {
    float* dst = out.data() + ((n / gw) / k * tw + (n % gw) / k) * H;
    const float* src = x.data() + n * H;
    for (int64_t d = 0; d < H; ++d) dst[d] += src[d] * inv_k2;
  }
  const auto root = static_cast<float>(std::sqrt(static_cast<double>(H)));
  for (float& e : out) e *= root;
  if (!std_bias_.empty())
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < H; ++d) {
        float& e = out[static_cast<size_t>(t * H + d)];
        e = (e - std_bias_[static_cast<size_t>(d)]) * std_scale_[static_cast<size_t>(d)];
      }
  return out;
}

EncodedImage Gemma4Vision::project(const std::vector<float>& tower_out, int64_t grid_h,
                                   int64_t grid_w) {
  const int64_t H = c_.hidden, T = (grid_h / c_.pool) * (grid_w / c_.pool);
  if (static_cast<int64_t>(tower_out.size()) != T * H)
    fail(ErrorKind::Input, "a Gemma 4 vision output of " + std::to_string(tower_out.size()) +
                               " floats, expected " + std::to_string(T * H));
  std::vector<float> normed(tower_out.size());
  cpu_->rms_norm(tower_out.data(), ones_.data(), T, H, c_.eps, false, normed.data());
  EncodedImage out;
  out.grid_h = grid_h / c_.pool;
  out.grid_w = grid_w / c_.pool;
  out.embeds.resize(static_cast<size_t>(T * c_.out_hidden));
  cpu_->matmul(proj_, normed.data(), T, out.embeds.data());
  return out;
}

void Gemma4Vision::set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) {
  if (min_pixels != 0 || max_pixels != 0)
    fail(ErrorKind::Usage, path() + ": Gemma 4 sizes images by their soft tokens (at most " +
                               std::to_string(c_.max_soft_tokens) +
                               ", preprocessor_config.json's max_soft_tokens), not pixel bounds");
}

void Gemma4Vision::set_max_tokens(int64_t max_tokens) {
  if (max_tokens < 1 || max_tokens > (1 << 16))
    fail(ErrorKind::Usage, path() + ": an image's token bound " + std::to_string(max_tokens) +
                               " is out of range [1, 65536]");
  c_.max_soft_tokens = max_tokens;
}

EncodedImage Gemma4Vision::encode_file(const uint8_t* data, size_t size) {
  const ImagePatches p =
      gemma4_patches(decode_image(data, size), c_.patch, c_.pool, c_.max_soft_tokens, c_.rescale);
  EncodedImage out = project(tower(p), p.grid_h, p.grid_w);
  out.key = image_key(data, size);
  return out;
}

}  // namespace ts

#include "vision/gemma3_vision.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/host_ops.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/config_view.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/tower_checks.h"
#include "vision/vision_config.h"

namespace ts {
namespace {

constexpr const char* kTower = "Gemma 3 vision";

void read_gguf(const ModelSource& s, Gemma3VisionConfig& c) {
  const ConfigView v(s, nullptr);
  c.hidden = v.req_int("vision.embedding_length", nullptr);
  c.heads = v.req_int("vision.attention.head_count", nullptr);
  c.depth = v.req_int("vision.block_count", nullptr);
  c.ff = v.req_int("vision.feed_forward_length", nullptr);
  c.image_size = v.req_int("vision.image_size", nullptr);
  c.patch = v.req_int("vision.patch_size", nullptr);
  c.out_hidden = v.req_int("vision.projection_dim", nullptr);
  // The converter writes the pooling only where it is not Gemma 3's 4 (64 x 64 patches to 256).
  c.pool = v.opt_int("vision.projector.scale_factor", nullptr).value_or(4);
  c.eps = static_cast<float>(
      v.opt_float("vision.attention.layer_norm_epsilon", nullptr).value_or(1e-6));
  read_gguf_normalisation(s, c.mean, c.std);
}

// config.json as a whole (the source's own view of it is the text decoder's text_config).
void read_hf(const ModelSource& s, Gemma3VisionConfig& c) {
  const nlohmann::json& top = s.hf()->config();
  const std::string where = s.path() + "/config.json";
  const auto node = [&](const char* key) -> const nlohmann::json& {
    auto it = top.find(key);
    if (it == top.end() || !it->is_object())
      fail(ErrorKind::Model, where + ": no '" + key + "' (not a Gemma 3 vision model)");
    return *it;
  };
  const auto integer = [&](const nlohmann::json& j, const std::string& section, const char* key,
                           std::optional<int64_t> fallback) -> int64_t {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (fallback) return *fallback;
      fail(ErrorKind::Model, where + ": missing '" + section + key + "'");
    }
    if (!it->is_number_integer())
      fail(ErrorKind::Model, where + ": '" + section + key + "': expected an integer");
    return it->get<int64_t>();
  };
  const nlohmann::json& vc = node("vision_config");
  c.hidden = integer(vc, "vision_config/", "hidden_size", std::nullopt);
  c.heads = integer(vc, "vision_config/", "num_attention_heads", std::nullopt);
  c.depth = integer(vc, "vision_config/", "num_hidden_layers", std::nullopt);
  c.ff = integer(vc, "vision_config/", "intermediate_size", std::nullopt);
  c.image_size = integer(vc, "vision_config/", "image_size", std::nullopt);
  c.patch = integer(vc, "vision_config/", "patch_size", std::nullopt);
  c.out_hidden = integer(node("text_config"), "text_config/", "hidden_size", std::nullopt);
  const int64_t tokens = integer(top, "", "mm_tokens_per_image", 256);
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(tokens))));
  if (tokens <= 0 || side * side != tokens || c.patch <= 0 || (c.image_size / c.patch) % side)
    fail(ErrorKind::Model, where + ": 'mm_tokens_per_image' " + std::to_string(tokens) +
                               " is not a square that divides the patch grid");
  c.pool = c.image_size / c.patch / side;
  c.eps = vc.value("layer_norm_eps", 1e-6f);
  const std::string act = vc.value("hidden_act", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu")
    fail(ErrorKind::Model, where + ": 'vision_config/hidden_act' '" + act + "' is not supported");
  c.mlp_gelu_tanh = act == "gelu_pytorch_tanh";
  // The processor's normalisation and size, in preprocessor_config.json beside config.json.
  std::ifstream in(s.path() + "/preprocessor_config.json");
  if (!in) return;
  const std::string pre_where = s.path() + "/preprocessor_config.json";
  const auto pre = nlohmann::json::parse(in, nullptr, false);
  if (!pre.is_object()) fail(ErrorKind::Model, pre_where + ": not a JSON object");
  for (const char* key : {"image_mean", "image_std"}) {
    auto it = pre.find(key);
    if (it == pre.end()) continue;
    if (!it->is_array() || it->size() != 3 || !(*it)[0].is_number() || !(*it)[1].is_number() ||
        !(*it)[2].is_number())
      fail(ErrorKind::Model, pre_where + ": '" + key + "': expected 3 numbers");
    auto& dst = std::string(key) == "image_mean" ? c.mean : c.std;
    for (size_t i = 0; i < 3; ++i) dst[i] = (*it)[i].get<float>();
  }
  if (auto it = pre.find("rescale_factor"); it != pre.end() && it->is_number())
    c.rescale = it->get<double>();
  if (auto it = pre.find("size"); it != pre.end() && it->is_object())
    for (const char* key : {"height", "width"})
      if (it->value(key, c.image_size) != c.image_size)
        fail(ErrorKind::Model, pre_where + ": 'size/" + key + "' is not the tower's image_size " +
                                   std::to_string(c.image_size));
}

void check(const ModelSource& s, const Gemma3VisionConfig& c) {
  const auto in = [&](const char* what, int64_t x, int64_t lo, int64_t hi) {
    check_range(s, kTower, what, x, lo, hi);
  };
  in("hidden size", c.hidden, 1, 1 << 16);
  in("heads", c.heads, 1, 1024);
  in("blocks", c.depth, 1, 1024);
  in("MLP width", c.ff, 1, 1 << 18);
  in("patch size", c.patch, 1, 1024);
  in("image size", c.image_size, c.patch, 8192);
  in("pooling", c.pool, 1, c.image_size / c.patch);
  in("projection width", c.out_hidden, 1, 1 << 20);
  if (c.hidden % c.heads != 0)
    fail(ErrorKind::Model, s.path() + ": " + kTower + " hidden " + std::to_string(c.hidden) +
                               " is not a multiple of its " + std::to_string(c.heads) + " heads");
  if (c.image_size % c.patch != 0 || c.side() % c.pool != 0)
    fail(ErrorKind::Model, s.path() + ": " + kTower + " image size " +
                               std::to_string(c.image_size) + " is not whole patches of " +
                               std::to_string(c.patch) + " pooled " + std::to_string(c.pool) +
                               " x " + std::to_string(c.pool));
  for (float x : c.std)
    if (!(x > 0)) fail(ErrorKind::Model, s.path() + ": image_std must be positive");
}

}  // namespace

Gemma3Vision::~Gemma3Vision() = default;

std::unique_ptr<Gemma3Vision> Gemma3Vision::open(const std::string& path, int threads) {
  std::unique_ptr<Gemma3Vision> v(new Gemma3Vision());
  v->source_ = ModelSource::open(path);
  if (v->source_->gguf() != nullptr) {
    require_projector(*v->source_, "gemma3", "Gemma 3");
    read_gguf(*v->source_, v->c_);
  } else {
    read_hf(*v->source_, v->c_);
  }
  check(*v->source_, v->c_);
  v->start(threads, kTower);
  v->load();
  return v;
}

void Gemma3Vision::load() {
  const bool gguf = source_->gguf() != nullptr;
  const int64_t H = c_.hidden, P = c_.patch, n_pos = c_.side() * c_.side();
  // HF: the tower under the official checkpoints' name or transformers 5's, the projector
  // under either's.
  std::string v = "v.", mm = "mm.";
  if (!gguf) {
    v.clear();
    for (const char* p : {"vision_tower.vision_model.", "model.vision_tower.vision_model.",
                          "vision_tower.", "model.vision_tower."})
      if (v.empty() && source_->find(std::string(p) + "embeddings.patch_embedding.weight")) v = p;
    if (v.empty()) v = "vision_tower.vision_model.";  // missing: need() names it
    mm = source_->find("model.multi_modal_projector.mm_soft_emb_norm.weight")
             ? "model.multi_modal_projector."
             : "multi_modal_projector.";
  }
  const auto name = [&](const char* gguf_name, const std::string& hf_name) {
    return gguf ? v + gguf_name : v + hf_name;
  };
  const TensorRef pw =
      w_->need(name("patch_embd.weight", "embeddings.patch_embedding.weight"), {P, P, 3, H});
  patch_.w = cpu_->upload_weight(pw.dtype, H, c_.patch_values(),
                                 pw.nbytes / static_cast<uint64_t>(H), pw.data());
  patch_.b = w_->floats(name("patch_embd.bias", "embeddings.patch_embedding.bias"), {H});
  pos_table_ =
      w_->floats(name("position_embd.weight", "embeddings.position_embedding.weight"), {H, n_pos});
  for (int64_t l = 0; l < c_.depth; ++l) {
    const std::string g = v + "blk." + std::to_string(l) + ".",
                      h = v + "encoder.layers." + std::to_string(l) + ".";
    const auto lin = [&](const char* gn, const char* hn, int64_t in, int64_t out) {
      const std::string base = gguf ? g + gn : h + hn;
      return w_->linear(base + ".weight", base + ".bias", in, out);
    };
    const auto norm = [&](const char* gn, const char* hn) {
      const std::string base = gguf ? g + gn : h + hn;
      return w_->norm(base + ".weight", base + ".bias", H);
    };
    Block b;
    b.ln1 = norm("ln1", "layer_norm1");
    b.ln2 = norm("ln2", "layer_norm2");
    b.q = lin("attn_q", "self_attn.q_proj", H, H);
    b.k = lin("attn_k", "self_attn.k_proj", H, H);
    b.v = lin("attn_v", "self_attn.v_proj", H, H);
    b.out = lin("attn_out", "self_attn.out_proj", H, H);
    b.fc1 = lin("ffn_up", "mlp.fc1", H, c_.ff);
    b.fc2 = lin("ffn_down", "mlp.fc2", c_.ff, H);
    blocks_.push_back(std::move(b));
  }
  post_ = gguf ? w_->norm(v + "post_ln.weight", v + "post_ln.bias", H)
               : w_->norm(v + "post_layernorm.weight", v + "post_layernorm.bias", H);
  // The converter stores the soft embedding norm's 1 + w; transformers keeps w.
  soft_norm_ = w_->floats(mm + (gguf ? "soft_emb_norm.weight" : "mm_soft_emb_norm.weight"), {H});
  if (!gguf)
    for (float& x : soft_norm_) x += 1.0f;
  // Both store the projection as x W ([hidden][out_hidden]): transposed for the matmul.
  const std::vector<float> w = w_->floats(
      mm + (gguf ? "input_projection.weight" : "mm_input_projection_weight"), {c_.out_hidden, H});
  proj_host_.resize(w.size());
  for (int64_t i = 0; i < H; ++i)
    for (int64_t o = 0; o < c_.out_hidden; ++o)
      proj_host_[static_cast<size_t>(o * H + i)] = w[static_cast<size_t>(i * c_.out_hidden + o)];
  proj_ = cpu_->upload_weight(DType::F32, c_.out_hidden, H, static_cast<size_t>(H) * sizeof(float),
                              proj_host_.data());
}

std::vector<float> Gemma3Vision::tower(const float* pixels) {
  const int64_t H = c_.hidden, P = c_.patch, S = c_.image_size, side = c_.side(), N = side * side;
  // Each patch's values in the Conv2d weight's order (channel, row, column).
  std::vector<float> patches(static_cast<size_t>(N * c_.patch_values()));
  for (int64_t p = 0; p < N; ++p) {
    const int64_t py = p / side, px = p % side;
    float* dst = patches.data() + p * c_.patch_values();
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < P; ++y)
        std::copy_n(pixels + (ch * S + py * P + y) * S + px * P, P, dst + (ch * P + y) * P);
  }
  std::vector<float> x(static_cast<size_t>(N * H));
  w_->apply(patch_, patches.data(), N, x.data());
  cpu_->add(x.data(), pos_table_.data(), N * H);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H / c_.heads));
  std::vector<float> h(x.size()), q(x.size()), k(x.size()), v(x.size()), att(x.size()),
      ff(static_cast<size_t>(N * c_.ff));
  for (const Block& B : blocks_) {
    layer_norm(*pool_, x.data(), B.ln1.w.data(), B.ln1.b.data(), N, H, c_.eps, h.data());
    w_->apply(B.q, h.data(), N, q.data());
    w_->apply(B.k, h.data(), N, k.data());
    w_->apply(B.v, h.data(), N, v.data());
    full_attention(*cpu_, q.data(), k.data(), v.data(), N, c_.heads, H / c_.heads, scale,
                   att.data());
    w_->block_tail(*pool_, B.out, att.data(), B.ln2, B.fc1, B.fc2, c_.eps, c_.mlp_gelu_tanh, N,
                   x.data(), h.data(), ff.data());
  }
  layer_norm(*pool_, x.data(), post_.w.data(), post_.b.data(), N, H, c_.eps, x.data());
  return x;
}

EncodedImage Gemma3Vision::project(const std::vector<float>& tower_out) {
  const int64_t H = c_.hidden, side = c_.side(), k = c_.pool, ts = c_.tokens_side(), T = ts * ts;
  if (static_cast<int64_t>(tower_out.size()) != side * side * H)
    fail(ErrorKind::Input, "a Gemma 3 vision output of " + std::to_string(tower_out.size()) +
                               " floats, expected " + std::to_string(side * side * H));
  std::vector<float> pooled(static_cast<size_t>(T * H), 0.0f);
  const float inv = 1.0f / static_cast<float>(k * k);
  for (int64_t t = 0; t < T; ++t) {
    float* dst = pooled.data() + t * H;
    for (int64_t dy = 0; dy < k; ++dy)
      for (int64_t dx = 0; dx < k; ++dx) {
        const float* src = tower_out.data() + ((t / ts * k + dy) * side + t % ts * k + dx) * H;
        for (int64_t d = 0; d < H; ++d) dst[d] += src[d];
      }
    for (int64_t d = 0; d < H; ++d) dst[d] *= inv;
  }
  cpu_->rms_norm(pooled.data(), soft_norm_.data(), T, H, c_.eps, false, pooled.data());
  EncodedImage out;
  out.grid_h = ts;
  out.grid_w = ts;
  out.embeds.resize(static_cast<size_t>(T * c_.out_hidden));
  cpu_->matmul(proj_, pooled.data(), T, out.embeds.data());
  return out;
}

void Gemma3Vision::set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) {
  if (min_pixels != 0 || max_pixels != 0)
    fail(ErrorKind::Usage, path() + ": Gemma 3 resizes every image to " +
                               std::to_string(c_.image_size) + " x " +
                               std::to_string(c_.image_size) + " (no pixel bounds to set)");
}

EncodedImage Gemma3Vision::encode_file(const uint8_t* data, size_t size) {
  const std::vector<float> pixels =
      square_planes(decode_image(data, size), c_.image_size, c_.rescale, c_.mean, c_.std);
  EncodedImage out = project(tower(pixels.data()));
  out.key = image_key(data, size);
  return out;
}

}  // namespace ts

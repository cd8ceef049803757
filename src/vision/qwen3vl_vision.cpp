#include "vision/qwen3vl_vision.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/host_ops.h"
#include "core/error.h"

namespace ts {

Qwen3VLVision::~Qwen3VLVision() = default;

std::unique_ptr<Qwen3VLVision> Qwen3VLVision::open(const std::string& path, int threads) {
  std::unique_ptr<Qwen3VLVision> v(new Qwen3VLVision());
  v->source_ = ModelSource::open(path);
  v->c_ = read_vision_config(*v->source_);
  v->start(threads, "Qwen3-VL vision");
  v->load();
  ProcessorConfig& p = v->processor_;
  p.patch = v->c_.patch;
  p.merge = v->c_.merge;
  p.temporal = v->c_.temporal;
  p.min_pixels = v->c_.min_pixels;
  p.max_pixels = std::min(v->c_.max_pixels, kMaxImagePixels);
  p.mean = v->c_.mean;
  p.std = v->c_.std;
  return v;
}

Qwen3VLVision::Merger Qwen3VLVision::merger(const std::string& p, bool gguf_final,
                                            int64_t norm_width) {
  const bool gguf = source_->gguf() != nullptr;
  const int64_t wide = c_.hidden * c_.merge * c_.merge;
  Merger m;
  if (gguf && gguf_final) {
    m.norm = w_->norm("v.post_ln.weight", "v.post_ln.bias", norm_width);
    m.fc1 = w_->linear("mm.0.weight", "mm.0.bias", wide, wide);
    m.fc2 = w_->linear("mm.2.weight", "mm.2.bias", wide, c_.out_hidden);
  } else {
    const std::string fc = gguf ? "fc" : "linear_fc";
    m.norm = w_->norm(p + "norm.weight", p + "norm.bias", norm_width);
    m.fc1 = w_->linear(p + fc + "1.weight", p + fc + "1.bias", wide, wide);
    m.fc2 = w_->linear(p + fc + "2.weight", p + fc + "2.bias", wide, c_.out_hidden);
  }
  return m;
}

void Qwen3VLVision::load() {
  const bool gguf = source_->gguf() != nullptr;
  const int64_t H = c_.hidden, P = c_.patch, T = c_.temporal, C = c_.channels;
  if (gguf) {
    // One 2-D kernel [hidden][C][P][P] per frame: interleaved into the Conv3d's [C][T][P][P].
    patch_host_.resize(static_cast<size_t>(H * c_.patch_values()));
    for (int64_t t = 0; t < T; ++t) {
      const std::string name =
          t == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight." + std::to_string(t);
      const std::vector<float> k = w_->floats(name, {P, P, C, H});
      for (int64_t o = 0; o < H; ++o)
        for (int64_t ch = 0; ch < C; ++ch)
          std::copy_n(k.data() + ((o * C + ch) * P * P), P * P,
                      patch_host_.data() + o * c_.patch_values() + (ch * T + t) * P * P);
    }
    patch_.w = cpu_->upload_weight(DType::F32, H, c_.patch_values(),
                                   static_cast<size_t>(c_.patch_values()) * sizeof(float),
                                   patch_host_.data());
    patch_.b = w_->floats("v.patch_embd.bias", {H});
    pos_table_ = w_->floats("v.position_embd.weight", {H, c_.n_pos});
  } else {
    const TensorRef w = w_->need("model.visual.patch_embed.proj.weight", {P, P, T, C, H});
    if (!cpu_->has_weight_kernels(w.dtype))
      fail(ErrorKind::Unsupported, path() + ": the patch embedding's type is not supported");
    patch_.w = cpu_->upload_weight(w.dtype, H, c_.patch_values(),
                                   w.nbytes / static_cast<uint64_t>(H), w.data());
    patch_.b = w_->floats("model.visual.patch_embed.proj.bias", {H});
    pos_table_ = w_->floats("model.visual.pos_embed.weight", {H, c_.n_pos});
  }
  for (int64_t l = 0; l < c_.depth; ++l) {
    Block b;
    if (gguf) {
      const std::string p = "v.blk." + std::to_string(l) + ".";
      b.ln1 = w_->norm(p + "ln1.weight", p + "ln1.bias", H);
      b.ln2 = w_->norm(p + "ln2.weight", p + "ln2.bias", H);
      b.qkv = w_->linear(p + "attn_qkv.weight", p + "attn_qkv.bias", H, 3 * H);
      b.proj = w_->linear(p + "attn_out.weight", p + "attn_out.bias", H, H);
      b.fc1 = w_->linear(p + "ffn_up.weight", p + "ffn_up.bias", H, c_.ff);
      b.fc2 = w_->linear(p + "ffn_down.weight", p + "ffn_down.bias", c_.ff, H);
    } else {
      const std::string p = "model.visual.blocks." + std::to_string(l) + ".";
      b.ln1 = w_->norm(p + "norm1.weight", p + "norm1.bias", H);
      b.ln2 = w_->norm(p + "norm2.weight", p + "norm2.bias", H);
      b.qkv = w_->linear(p + "attn.qkv.weight", p + "attn.qkv.bias", H, 3 * H);
      b.proj = w_->linear(p + "attn.proj.weight", p + "attn.proj.bias", H, H);
      b.fc1 = w_->linear(p + "mlp.linear_fc1.weight", p + "mlp.linear_fc1.bias", H, c_.ff);
      b.fc2 = w_->linear(p + "mlp.linear_fc2.weight", p + "mlp.linear_fc2.bias", c_.ff, H);
    }
    blocks_.push_back(std::move(b));
  }
  const int64_t wide = H * c_.merge * c_.merge;
  final_ = merger("model.visual.merger.", true, H);
  for (size_t k = 0; k < c_.deepstack_layers.size(); ++k)
    deepstack_.push_back(
        merger(gguf ? "v.deepstack." + std::to_string(k) + "."
                    : "model.visual.deepstack_merger_list." + std::to_string(k) + ".",
               false, wide));
  // transformers' axial rotary: head_dim / 4 frequencies base^(-2j / (head_dim / 2)), used once
  // by the row and once by the column.
  const int64_t quarter = c_.head_dim() / 4, half_dim = c_.head_dim() / 2;
  for (int s = 0; s < 2; ++s)
    for (int64_t j = 0; j < quarter; ++j) {
      const float e = static_cast<float>(2 * j) / static_cast<float>(half_dim);
      inv_freq_.push_back(1.0f / std::pow(c_.rope_theta, e));
      streams_.push_back(static_cast<uint8_t>(s));
    }
}

std::vector<float> Qwen3VLVision::run_merger(const Merger& m, const float* x, int64_t patches,
                                             bool per_patch) {
  const int64_t unit = c_.merge * c_.merge, wide = c_.hidden * unit, tokens = patches / unit;
  std::vector<float> h(static_cast<size_t>(patches * c_.hidden));
  if (per_patch)
    layer_norm(*pool_, x, m.norm.w.data(), m.norm.b.data(), patches, c_.hidden, c_.eps, h.data());
  else
    layer_norm(*pool_, x, m.norm.w.data(), m.norm.b.data(), tokens, wide, c_.eps, h.data());
  std::vector<float> mid(static_cast<size_t>(tokens * wide));
  w_->apply(m.fc1, h.data(), tokens, mid.data());
  gelu(*pool_, mid.data(), tokens * wide, false);  // nn.GELU(): the erf form
  std::vector<float> out(static_cast<size_t>(tokens * c_.out_hidden));
  w_->apply(m.fc2, mid.data(), tokens, out.data());
  return out;
}

EncodedImage Qwen3VLVision::encode(const float* pixels, int64_t grid_h, int64_t grid_w) {
  const int64_t m = c_.merge, H = c_.hidden, side = c_.pos_side();
  if (grid_h <= 0 || grid_w <= 0 || grid_h % m != 0 || grid_w % m != 0 || grid_h > 4096 ||
      grid_w > 4096)
    fail(ErrorKind::Input, "an image grid of " + std::to_string(grid_h) + " x " +
                               std::to_string(grid_w) + " patches (multiples of " +
                               std::to_string(m) + " up to 4096 are taken)");
  const int64_t N = grid_h * grid_w;
  std::vector<float> x(static_cast<size_t>(N * H));
  w_->apply(patch_, pixels, N, x.data());
  // Each patch's row and column (patches come merge window by merge window), the position
  // table resampled to the grid at them, and the rotary's positions.
  std::vector<int32_t> pos(static_cast<size_t>(3 * N), 0);
  const int64_t blocks_w = grid_w / m;
  const auto axis = [&](int64_t index, int64_t size, int64_t taps[2], float w[2]) {
    const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                      static_cast<float>(std::max<int64_t>(size - 1, 1));
    const float f = std::floor(src);
    for (int o = 0; o < 2; ++o) {
      taps[o] = std::clamp<int64_t>(static_cast<int64_t>(f) + o, 0, side - 1);
      w[o] = std::max(0.0f, 1.0f - std::fabs(src - f - static_cast<float>(o)));
    }
  };
  for (int64_t i = 0; i < N; ++i) {
    const int64_t in_col = i % m, in_row = (i / m) % m, block = i / (m * m);
    const int64_t row = (block / blocks_w) * m + in_row, col = (block % blocks_w) * m + in_col;
    pos[static_cast<size_t>(3 * i)] = static_cast<int32_t>(row);
    pos[static_cast<size_t>(3 * i + 1)] = static_cast<int32_t>(col);
    int64_t ht[2], wt[2];
    float hw[2], ww[2];
    axis(row, grid_h, ht, hw);
    axis(col, grid_w, wt, ww);
    float* xi = x.data() + i * H;
    std::vector<float> sum(static_cast<size_t>(H), 0.0f);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const float wgt = hw[a] * ww[b];
        const float* e = pos_table_.data() + (ht[a] * side + wt[b]) * H;
        for (int64_t d = 0; d < H; ++d) sum[static_cast<size_t>(d)] += e[d] * wgt;
      }
    for (int64_t d = 0; d < H; ++d) xi[d] += sum[static_cast<size_t>(d)];
  }
  const RopeArgs rope{c_.head_dim(), c_.head_dim(), true, inv_freq_.data(), streams_.data()};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim()));
  std::vector<float> h(x.size()), qkv(static_cast<size_t>(3 * N * H)), q(x.size()), k(x.size()),
      v(x.size()), att(x.size()), ff(static_cast<size_t>(N * c_.ff));
  EncodedImage out;
  out.grid_h = grid_h / m;
  out.grid_w = grid_w / m;
  for (int64_t l = 0; l < c_.depth; ++l) {
    const Block& B = blocks_[static_cast<size_t>(l)];
    layer_norm(*pool_, x.data(), B.ln1.w.data(), B.ln1.b.data(), N, H, c_.eps, h.data());
    w_->apply(B.qkv, h.data(), N, qkv.data());
    for (int64_t i = 0; i < N; ++i) {
      const float* r = qkv.data() + i * 3 * H;
      std::copy_n(r, H, q.data() + i * H);
      std::copy_n(r + H, H, k.data() + i * H);
      std::copy_n(r + 2 * H, H, v.data() + i * H);
    }
    cpu_->rope(q.data(), N, c_.heads, pos.data(), rope);
    cpu_->rope(k.data(), N, c_.heads, pos.data(), rope);
    full_attention(*cpu_, q.data(), k.data(), v.data(), N, c_.heads, c_.head_dim(), scale,
                   att.data());
    w_->block_tail(*pool_, B.proj, att.data(), B.ln2, B.fc1, B.fc2, c_.eps, c_.mlp_gelu_tanh, N,
                   x.data(), h.data(), ff.data());
    for (size_t d = 0; d < c_.deepstack_layers.size(); ++d)
      if (c_.deepstack_layers[d] == l) {
        const std::vector<float> f = run_merger(deepstack_[d], x.data(), N, false);
        out.deepstack.insert(out.deepstack.end(), f.begin(), f.end());
      }
  }
  out.embeds = run_merger(final_, x.data(), N, true);
  return out;
}

void Qwen3VLVision::set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) {
  if (min_pixels == 0) min_pixels = processor_.min_pixels;
  if (max_pixels == 0) max_pixels = processor_.max_pixels;
  if (min_pixels <= 0 || max_pixels < min_pixels || max_pixels > kMaxImagePixels)
    fail(ErrorKind::Usage, "image pixel bounds [" + std::to_string(min_pixels) + ", " +
                               std::to_string(max_pixels) + "] are not within [1, " +
                               std::to_string(kMaxImagePixels) + "]");
  processor_.min_pixels = min_pixels;
  processor_.max_pixels = max_pixels;
}

EncodedImage Qwen3VLVision::encode_file(const uint8_t* data, size_t size) {
  const ImagePatches patches = preprocess_image(decode_image(data, size), processor_);
  EncodedImage out = encode(patches.values.data(), patches.grid_h, patches.grid_w);
  out.key = image_key(data, size);
  return out;
}

}  // namespace ts

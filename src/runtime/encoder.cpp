#include "runtime/encoder.h"

#include "backend/cpu/attention.h"
#include "backend/cpu/host_ops.h"
#include "core/error.h"
#include "model/family.h"
#include "runtime/rope_freqs.h"

namespace ts {
namespace {

// An encoder's tensor names in one source's layout: the embeddings' (positions: none where they
// are rotary), then the parts of layer N after `layer` + "N.". A fused q / k / v projection is
// `qkv` (q, k and v none); an FFN without a gate has none.
struct EncoderNames {
  const char* tokens = nullptr;
  const char* positions = nullptr;
  const char* types = nullptr;
  const char* embd_norm = nullptr;
  const char* layer = nullptr;
  const char* qkv = nullptr;
  const char* q = nullptr;
  const char* k = nullptr;
  const char* v = nullptr;
  const char* o = nullptr;
  const char* attn_norm = nullptr;
  const char* up = nullptr;
  const char* gate = nullptr;
  const char* down = nullptr;
  const char* out_norm = nullptr;
};

// llama.cpp's converter writes both families under the same names (nomic-bert's q, k and v
// stacked: encoder_names).
constexpr EncoderNames kGguf{.tokens = "token_embd",
                             .positions = "position_embd",
                             .types = "token_types",
                             .embd_norm = "token_embd_norm",
                             .layer = "blk.",
                             .q = "attn_q",
                             .k = "attn_k",
                             .v = "attn_v",
                             .o = "attn_output",
                             .attn_norm = "attn_output_norm",
                             .up = "ffn_up",
                             .gate = "ffn_gate",
                             .down = "ffn_down",
                             .out_norm = "layer_output_norm"};
constexpr EncoderNames kBertModel{.tokens = "embeddings.word_embeddings",
                                  .positions = "embeddings.position_embeddings",
                                  .types = "embeddings.token_type_embeddings",
                                  .embd_norm = "embeddings.LayerNorm",
                                  .layer = "encoder.layer.",
                                  .q = "attention.self.query",
                                  .k = "attention.self.key",
                                  .v = "attention.self.value",
                                  .o = "attention.output.dense",
                                  .attn_norm = "attention.output.LayerNorm",
                                  .up = "intermediate.dense",
                                  .down = "output.dense",
                                  .out_norm = "output.LayerNorm"};
// nomic-ai's own layout (its remote code's names, as nomic-embed-text ships): fc11 is the up
// projection, fc12 the gate.
constexpr EncoderNames kNomicAi{.tokens = "embeddings.word_embeddings",
                                .types = "embeddings.token_type_embeddings",
                                .embd_norm = "emb_ln",
                                .layer = "encoder.layers.",
                                .qkv = "attn.Wqkv",
                                .o = "attn.out_proj",
                                .attn_norm = "norm1",
                                .up = "mlp.fc11",
                                .gate = "mlp.fc12",
                                .down = "mlp.fc2",
                                .out_norm = "norm2"};
// transformers' NomicBertModel as save_pretrained writes it.
constexpr EncoderNames kNomicTransformers{.tokens = "embeddings.word_embeddings",
                                          .types = "embeddings.token_type_embeddings",
                                          .embd_norm = "embeddings.LayerNorm",
                                          .layer = "layers.",
                                          .q = "self_attn.q_proj",
                                          .k = "self_attn.k_proj",
                                          .v = "self_attn.v_proj",
                                          .o = "self_attn.o_proj",
                                          .attn_norm = "post_attention_layernorm",
                                          .up = "mlp.up_proj",
                                          .gate = "mlp.gate_proj",
                                          .down = "mlp.down_proj",
                                          .out_norm = "post_mlp_layernorm"};

// The names of `s`'s layout, and which of them the config leaves out.
EncoderNames encoder_names(const ModelSource& s, const ArchConfig& c) {
  EncoderNames n;
  if (s.kind() == SourceKind::Gguf) {
    n = kGguf;
    // nomic-bert's converter stacks q, k and v.
    if (c.family == Family::NomicBert) n.qkv = "attn_qkv", n.q = n.k = n.v = nullptr;
  } else if (c.family == Family::NomicBert) {
    // Both layouts are NomicBertModel with a config of nomic-ai's keys or transformers' (a
    // checkpoint loaded from one and saved by the other keeps both): the tensors tell.
    n = s.find("layers.0.self_attn.q_proj.weight") ? kNomicTransformers : kNomicAi;
  } else {
    n = kBertModel;
  }
  if (c.encoder.positions != EncoderPositions::Learned) n.positions = nullptr;
  if (c.encoder.ffn != EncoderFfn::SwiGlu) n.gate = nullptr;
  return n;
}

}  // namespace

std::unique_ptr<Encoder> Encoder::open(const std::string& path, const std::string& backend,
                                       int threads) {
  std::unique_ptr<Encoder> e(new Encoder());
  e->source_ = ModelSource::open(path);
  e->c_ = read_arch_config(*e->source_);
  if (e->c_.stack != LayerStack::Encoder)
    fail(ErrorKind::Runtime, "internal: " + path + " is not an encoder model");
  if (backend == "cuda")
    fail(ErrorKind::Unsupported, path + ": " + family_name(e->c_.family) +
                                     " (an encoder) runs on the CPU only: use --backend cpu");
  e->cpu_ = make_cpu_backend(threads);
  e->pool_ = std::make_unique<ThreadPool>(threads > 0 ? threads : physical_cores());
  e->load();
  return e;
}

Encoder::~Encoder() {
  if (!cpu_) return;
  for (Weight* w : {&tokens_, &positions_, &types_})
    if (w->data != nullptr) cpu_->release_weight(*w);
  for (Layer& L : layers_)
    for (Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.up, &L.gate, &L.down})
      if (l->w.data != nullptr) cpu_->release_weight(l->w);
}

void Encoder::load() {
  const HostWeights w(*source_, *cpu_, family_name(c_.family) + std::string(" encoder"));
  const EncoderNames names = encoder_names(*source_, c_);
  const int64_t d = c_.n_embd, ff = c_.n_ff;
  // A table from its row `skip` on (rows: its own rows less the skipped, -1: any number).
  const auto table = [&](const char* name, int64_t rows, int64_t skip) {
    const TensorRef r = w.need(std::string(name) + ".weight", {d, rows < 0 ? -1 : rows + skip});
    const int64_t n_rows = r.rows() - skip;
    if (n_rows <= 0) fail(ErrorKind::Model, source_->path() + ": tensor '" + r.name + "' is empty");
    const uint64_t stride = r.nbytes / static_cast<uint64_t>(r.rows());
    return cpu_->upload_weight(r.dtype, n_rows, d, stride,
                               r.data() + stride * static_cast<uint64_t>(skip));
  };
  tokens_ = table(names.tokens, c_.n_vocab > 0 ? c_.n_vocab : -1, 0);
  if (c_.n_vocab == 0) c_.n_vocab = tokens_.rows;
  if (names.positions != nullptr)
    positions_ = table(names.positions, c_.encoder.n_positions, c_.encoder.position_offset);
  else
    inv_freq_ = rope_inv_freq(c_, false, {});
  types_ = table(names.types, -1, 0);
  const auto layer_name = [&](int64_t l, const char* part) {
    return names.layer + std::to_string(l) + "." + part;
  };
  const auto norm = [&](const std::string& name) {
    return w.norm(name + ".weight", name + ".bias", d);
  };
  const auto linear = [&](int64_t l, const char* part, int64_t in, int64_t out) {
    const std::string name = layer_name(l, part);
    return c_.encoder.biases ? w.linear(name + ".weight", name + ".bias", in, out)
                             : w.linear(name + ".weight", in, out);
  };
  embd_norm_ = norm(names.embd_norm);
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    Layer& L = layers_.emplace_back();
    if (names.qkv != nullptr) {
      std::vector<Linear> qkv = w.linear_parts(layer_name(l, names.qkv) + ".weight", d, {d, d, d});
      L.q = std::move(qkv[0]), L.k = std::move(qkv[1]), L.v = std::move(qkv[2]);
    } else {
      L.q = linear(l, names.q, d, d);
      L.k = linear(l, names.k, d, d);
      L.v = linear(l, names.v, d, d);
    }
    L.o = linear(l, names.o, d, d);
    L.attn_norm = norm(layer_name(l, names.attn_norm));
    L.up = linear(l, names.up, d, ff);
    if (names.gate != nullptr) L.gate = linear(l, names.gate, d, ff);
    L.down = linear(l, names.down, ff, d);
    L.out_norm = norm(layer_name(l, names.out_norm));
  }
  const auto bytes = [](const Weight& m) { return static_cast<uint64_t>(m.rows) * m.row_stride; };
  const auto floats = [](const std::vector<float>& f) { return uint64_t{4} * f.size(); };
  weight_bytes_ = bytes(tokens_) + bytes(positions_) + bytes(types_) + floats(embd_norm_.w) +
                  floats(embd_norm_.b);
  for (const Layer& L : layers_) {
    for (const Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.up, &L.gate, &L.down})
      weight_bytes_ += bytes(l->w) + floats(l->b);
    for (const Norm* m : {&L.attn_norm, &L.out_norm}) weight_bytes_ += floats(m->w) + floats(m->b);
  }
}

void Encoder::ffn(const Layer& L, const float* x, int64_t rows, float* ff, float* g,
                  float* out) const {
  const int64_t n = c_.n_ff;
  apply_linear(*cpu_, L.up, x, rows, ff);
  if (c_.encoder.ffn == EncoderFfn::SwiGlu) {
    apply_linear(*cpu_, L.gate, x, rows, g);
    cpu_->glu(Glu::SiLU, g, ff, rows, n, n, ff);
  } else {
    gelu(*pool_, ff, rows * n, c_.encoder.gelu_tanh);
  }
  apply_linear(*cpu_, L.down, ff, rows, out);
}

void Encoder::norm(const Norm& n, int64_t rows, float* x) const {
  layer_norm(*pool_, x, n.w.data(), n.b.data(), rows, c_.n_embd, c_.encoder.norm_eps, x);
}

void Encoder::check(const std::vector<int32_t>& tokens) const {
  const auto M = static_cast<int64_t>(tokens.size());
  if (M == 0) fail(ErrorKind::Input, "nothing to embed: the text has no tokens");
  if (M > c_.encoder.n_positions)
    fail(ErrorKind::Input, std::to_string(M) + " tokens exceed the encoder's " +
                               std::to_string(c_.encoder.n_positions) + " positions");
  for (const int32_t id : tokens)
    if (id < 0 || id >= tokens_.rows)
      fail(ErrorKind::Input, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                 std::to_string(tokens_.rows));
}

uint64_t Encoder::workspace_bytes(int64_t rows) const {
  // hidden()'s x, h, q, k, v and attention out of n_embd floats a row, the FFN's n_ff (and the
  // gate's), and the ids, positions and types (int32) of each row; full_attention's positions
  // and key ends.
  const int64_t ffn = c_.encoder.ffn == EncoderFfn::SwiGlu ? 2 * c_.n_ff : c_.n_ff;
  const auto per_row = static_cast<uint64_t>(6 * c_.n_embd + ffn + 5) * 4;
  // And the split states the attention of a short text keeps between calls.
  AttentionArgs a;
  a.n_head = a.n_head_kv = c_.n_head;
  a.head_dim = c_.head_dim;
  return per_row * static_cast<uint64_t>(rows) +
         cpu::full_attention_kept_bytes(a, std::min(rows, c_.encoder.n_positions),
                                        static_cast<int>(pool_->size()));
}

std::vector<float> Encoder::hidden(std::span<const std::vector<int32_t>> texts) const {
  int64_t M = 0;
  for (const std::vector<int32_t>& t : texts) {
    check(t);
    M += static_cast<int64_t>(t.size());
  }
  const int64_t d = c_.n_embd;
  const auto n = static_cast<size_t>(M * d);
  std::vector<float> x(n), h(n), q(n), k(n), v(n), att(n);
  std::vector<float> ff(static_cast<size_t>(M * c_.n_ff));
  std::vector<float> g(c_.encoder.ffn == EncoderFfn::SwiGlu ? ff.size() : 0);
  // Each text's tokens are of type 0 (one segment), at positions 0 .. its length - 1.
  std::vector<int32_t> ids, pos, type0(static_cast<size_t>(M), 0);
  ids.reserve(static_cast<size_t>(M));
  pos.reserve(static_cast<size_t>(M));
  for (const std::vector<int32_t>& t : texts)
    for (size_t i = 0; i < t.size(); ++i) {
      ids.push_back(t[i]);
      pos.push_back(static_cast<int32_t>(i));
    }
  cpu_->embed(tokens_, ids.data(), M, 1.0f, x.data());
  const bool rotary = c_.encoder.positions == EncoderPositions::Rotary;
  const RopeArgs rope{c_.head_dim, c_.rotary_dim, true, inv_freq_.data(), nullptr};
  if (!rotary) {
    cpu_->embed(positions_, pos.data(), M, 1.0f, h.data());
    cpu_->add(x.data(), h.data(), M * d);
  }
  cpu_->embed(types_, type0.data(), M, 1.0f, h.data());
  cpu_->add(x.data(), h.data(), M * d);
  norm(embd_norm_, M, x.data());
  for (const Layer& L : layers_) {
    apply_linear(*cpu_, L.q, x.data(), M, q.data());
    apply_linear(*cpu_, L.k, x.data(), M, k.data());
    apply_linear(*cpu_, L.v, x.data(), M, v.data());
    if (rotary) {
      cpu_->rope(q.data(), M, c_.n_head, pos.data(), rope);
      cpu_->rope(k.data(), M, c_.n_head, pos.data(), rope);
    }
    size_t row = 0;
    for (const std::vector<int32_t>& t : texts) {
      const size_t at = row * static_cast<size_t>(d);
      full_attention(*cpu_, q.data() + at, k.data() + at, v.data() + at,
                     static_cast<int64_t>(t.size()), c_.n_head, c_.head_dim, c_.attn_scale,
                     att.data() + at);
      row += t.size();
    }
    apply_linear(*cpu_, L.o, att.data(), M, h.data());
    cpu_->add(x.data(), h.data(), M * d);
    norm(L.attn_norm, M, x.data());
    ffn(L, x.data(), M, ff.data(), g.data(), h.data());
    cpu_->add(x.data(), h.data(), M * d);
    norm(L.out_norm, M, x.data());
  }
  return x;
}

std::vector<std::vector<float>> Encoder::embed(std::span<const std::vector<int32_t>> texts,
                                               Pooler& pooler) const {
  std::vector<float> rows = hidden(texts);
  const auto d = static_cast<size_t>(c_.n_embd);
  std::vector<std::vector<float>> out;
  out.reserve(texts.size());
  float* text_rows = rows.data();
  for (const std::vector<int32_t>& t : texts) {
    // Each text is one chunk; a pooling that wants only the last row gets it first.
    const auto n = static_cast<int64_t>(t.size());
    SeqChunk ch{nullptr, t.data(), n};
    pooler.want(ch, 0, n, text_rows);
    if (ch.hidden != nullptr && !ch.all_rows)
      std::copy(text_rows + (t.size() - 1) * d, text_rows + t.size() * d, text_rows);
    pooler.add(ch, 0);
    out.push_back(pooler.finish(n));
    text_rows += t.size() * d;
  }
  return out;
}

}  // namespace ts

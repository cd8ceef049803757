#include "runtime/encoder.h"

#include "backend/cpu/host_ops.h"
#include "core/error.h"
#include "model/family.h"

namespace ts {
namespace {

// A tensor's name in each form: GGUF (llama.cpp's converter) and a BertModel checkpoint.
struct TensorName {
  const char* gguf;
  const char* hf;
};

constexpr TensorName kTokens{"token_embd", "embeddings.word_embeddings"};
constexpr TensorName kPositions{"position_embd", "embeddings.position_embeddings"};
constexpr TensorName kTypes{"token_types", "embeddings.token_type_embeddings"};
constexpr TensorName kEmbdNorm{"token_embd_norm", "embeddings.LayerNorm"};
constexpr TensorName kQ{"attn_q", "attention.self.query"};
constexpr TensorName kK{"attn_k", "attention.self.key"};
constexpr TensorName kV{"attn_v", "attention.self.value"};
constexpr TensorName kO{"attn_output", "attention.output.dense"};
constexpr TensorName kAttnNorm{"attn_output_norm", "attention.output.LayerNorm"};
constexpr TensorName kUp{"ffn_up", "intermediate.dense"};
constexpr TensorName kDown{"ffn_down", "output.dense"};
constexpr TensorName kOutNorm{"layer_output_norm", "output.LayerNorm"};

// The tensor name of one source (layer -1: the embeddings').
std::string tensor_name(const ModelSource& s, const TensorName& n, int64_t layer,
                        const char* suffix) {
  const bool gguf = s.kind() == SourceKind::Gguf;
  std::string name;
  if (layer >= 0) name = (gguf ? "blk." : "encoder.layer.") + std::to_string(layer) + ".";
  return name + (gguf ? n.gguf : n.hf) + suffix;
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
    for (Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.up, &L.down})
      if (l->w.data != nullptr) cpu_->release_weight(l->w);
}

void Encoder::load() {
  const HostWeights w(*source_, *cpu_, "bert encoder");
  const auto name = [&](const TensorName& n, int64_t l, const char* suffix) {
    return tensor_name(*source_, n, l, suffix);
  };
  const int64_t d = c_.n_embd, ff = c_.n_ff;
  const auto table = [&](const TensorName& n, int64_t rows) {
    const TensorRef r = w.need(name(n, -1, ".weight"), {d, rows});
    const int64_t n_rows = r.rows();
    if (n_rows <= 0) fail(ErrorKind::Model, source_->path() + ": tensor '" + r.name + "' is empty");
    return cpu_->upload_weight(r.dtype, n_rows, d, r.nbytes / static_cast<uint64_t>(n_rows),
                               r.data());
  };
  tokens_ = table(kTokens, c_.n_vocab > 0 ? c_.n_vocab : -1);
  if (c_.n_vocab == 0) c_.n_vocab = tokens_.rows;
  positions_ = table(kPositions, c_.encoder.n_positions);
  types_ = table(kTypes, -1);
  const auto norm = [&](const TensorName& n, int64_t l) {
    return w.norm(name(n, l, ".weight"), name(n, l, ".bias"), d);
  };
  const auto linear = [&](const TensorName& n, int64_t l, int64_t in, int64_t out) {
    return w.linear(name(n, l, ".weight"), name(n, l, ".bias"), in, out);
  };
  embd_norm_ = norm(kEmbdNorm, -1);
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    Layer& L = layers_.emplace_back();
    L.q = linear(kQ, l, d, d);
    L.k = linear(kK, l, d, d);
    L.v = linear(kV, l, d, d);
    L.o = linear(kO, l, d, d);
    L.attn_norm = norm(kAttnNorm, l);
    L.up = linear(kUp, l, d, ff);
    L.down = linear(kDown, l, ff, d);
    L.out_norm = norm(kOutNorm, l);
  }
  const auto bytes = [](const Weight& m) { return static_cast<uint64_t>(m.rows) * m.row_stride; };
  const auto floats = [](const std::vector<float>& f) { return uint64_t{4} * f.size(); };
  weight_bytes_ = bytes(tokens_) + bytes(positions_) + bytes(types_) + floats(embd_norm_.w) +
                  floats(embd_norm_.b);
  for (const Layer& L : layers_) {
    for (const Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.up, &L.down})
      weight_bytes_ += bytes(l->w) + floats(l->b);
    for (const Norm* m : {&L.attn_norm, &L.out_norm}) weight_bytes_ += floats(m->w) + floats(m->b);
  }
}

void Encoder::apply(const Linear& l, const float* x, int64_t rows, float* y) const {
  cpu_->matmul(l.w, x, rows, y);
  cpu_->add_bias(y, l.b.data(), rows, l.w.rows);
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
  // hidden()'s x, h, q, k, v and attention out of n_embd floats a row, the FFN's n_ff, and the
  // ids, positions and types (int32) of each row; full_attention's positions and key ends.
  const auto per_row = static_cast<uint64_t>(6 * c_.n_embd + c_.n_ff + 5) * 4;
  return per_row * static_cast<uint64_t>(rows);
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
  cpu_->embed(positions_, pos.data(), M, 1.0f, h.data());
  cpu_->add(x.data(), h.data(), M * d);
  cpu_->embed(types_, type0.data(), M, 1.0f, h.data());
  cpu_->add(x.data(), h.data(), M * d);
  norm(embd_norm_, M, x.data());
  for (const Layer& L : layers_) {
    apply(L.q, x.data(), M, q.data());
    apply(L.k, x.data(), M, k.data());
    apply(L.v, x.data(), M, v.data());
    size_t row = 0;
    for (const std::vector<int32_t>& t : texts) {
      const size_t at = row * static_cast<size_t>(d);
      full_attention(*cpu_, q.data() + at, k.data() + at, v.data() + at,
                     static_cast<int64_t>(t.size()), c_.n_head, c_.head_dim, c_.attn_scale,
                     att.data() + at);
      row += t.size();
    }
    apply(L.o, att.data(), M, h.data());
    cpu_->add(x.data(), h.data(), M * d);
    norm(L.attn_norm, M, x.data());
    apply(L.up, x.data(), M, ff.data());
    gelu(*pool_, ff.data(), M * c_.n_ff, c_.encoder.gelu_tanh);
    apply(L.down, ff.data(), M, h.data());
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

#include "runtime/embedding.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {

std::vector<int32_t> embedding_tokens(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids = tok.encode(text, tok.add_bos(), true);
  if (tok.add_eos()) ids.push_back(tok.eos());
  return ids;
}

Pooler::Pooler(const EmbeddingSpec& spec, int64_t n_embd)
    : spec_(spec), d_(n_embd), acc_(static_cast<size_t>(n_embd), 0.0) {
  if (spec_.pooling == Pooling::None) fail(ErrorKind::Unsupported, spec_.why_none);
}

void Pooler::want(SeqChunk& ch, int64_t from, int64_t total, float* buf) const {
  const bool last = from + ch.n == total;
  switch (spec_.pooling) {
    case Pooling::Mean:
      ch.all_rows = true;
      break;
    case Pooling::Cls:
      if (from > 0) return;
      ch.all_rows = true;
      break;
    case Pooling::Last:
      if (!last) return;
      ch.all_rows = false;
      break;
    case Pooling::None:
      return;
  }
  ch.hidden = buf;
}

void Pooler::add(const SeqChunk& ch, int64_t from) {
  if (ch.hidden == nullptr) return;
  const auto d = static_cast<size_t>(d_);
  switch (spec_.pooling) {
    case Pooling::Mean:
      for (int64_t i = 0; i < ch.n; ++i)
        for (size_t j = 0; j < d; ++j) acc_[j] += ch.hidden[static_cast<size_t>(i) * d + j];
      break;
    case Pooling::Cls:
      if (from == 0) std::copy(ch.hidden, ch.hidden + d, acc_.begin());
      break;
    case Pooling::Last:
      std::copy(ch.hidden, ch.hidden + d, acc_.begin());
      break;
    case Pooling::None:
      break;
  }
}

std::vector<float> Pooler::finish(int64_t total) {
  if (spec_.pooling == Pooling::Mean)
    for (double& v : acc_) v /= static_cast<double>(total);
  double norm = 1.0;
  if (spec_.normalize) {
    double sq = 0.0;
    for (double v : acc_) sq += v * v;
    // sentence-transformers' Normalize (torch's F.normalize) keeps a zero vector zero.
    norm = std::max(std::sqrt(sq), 1e-12);
  }
  std::vector<float> out(acc_.size());
  for (size_t j = 0; j < acc_.size(); ++j) out[j] = static_cast<float>(acc_[j] / norm);
  std::fill(acc_.begin(), acc_.end(), 0.0);
  return out;
}

Embedder::Embedder(Engine& engine, const EmbeddingSpec& spec)
    : engine_(engine),
      pooler_(spec, engine.cfg().n_embd),
      kv_(engine, engine.options().ctx),
      forward_(engine, engine.options().prefill_batch),
      rows_(static_cast<size_t>(forward_.max_rows() * engine.cfg().n_embd)) {}

std::vector<float> Embedder::embed(const std::vector<int32_t>& tokens) {
  const auto total = static_cast<int64_t>(tokens.size());
  if (total == 0) fail(ErrorKind::Input, "nothing to embed: the text has no tokens");
  kv_.rewind(0);
  for (int64_t from = 0; from < total; from += forward_.max_rows()) {
    SeqChunk ch{&kv_, tokens.data() + from, std::min(forward_.max_rows(), total - from)};
    pooler_.want(ch, from, total, rows_.data());
    forward_.run({ch});
    pooler_.add(ch, from);
  }
  return pooler_.finish(total);
}

}  // namespace ts

#include "runtime/media_rows.h"

#include <algorithm>

namespace ts {

int64_t MediaRows::row_floats(const ArchConfig& c) {
  return c.n_deepstack * c.n_embd;
}

void MediaRows::prepare(const std::vector<SeqChunk>& chunks, float* x) {
  const int64_t d = c_.n_embd;
  rows_.clear();
  int64_t row = 0;
  for (const SeqChunk& ch : chunks) {
    const float* const* embeds = ch.in.embeds;
    // A run of rows whose embeddings lie one after another in host memory (an image's) goes in
    // one copy: a device's copy from the host waits for it.
    for (int64_t i = 0; embeds != nullptr && i < ch.n;) {
      if (embeds[i] == nullptr) {
        ++i;
        continue;
      }
      int64_t end = i + 1;
      while (end < ch.n && embeds[end] == embeds[i] + (end - i) * d) ++end;
      b_.to_device(x + (row + i) * d, embeds[i],
                   static_cast<size_t>((end - i) * d) * sizeof(float));
      i = end;
    }
    if (ch.in.deepstack != nullptr)
      for (int64_t i = 0; i < ch.n; ++i)
        if (ch.in.deepstack[i] != nullptr) rows_.push_back(static_cast<int32_t>(row + i));
    row += ch.n;
  }
  if (rows_.empty()) return;
  // By layer: layer l's features of every row, in the order of rows_.
  const auto R = static_cast<int64_t>(rows_.size());
  staging_.resize(static_cast<size_t>(c_.n_deepstack * R * d));
  int64_t r = 0;
  for (const SeqChunk& ch : chunks)
    for (int64_t i = 0; ch.in.deepstack != nullptr && i < ch.n; ++i) {
      const float* f = ch.in.deepstack[i];
      if (f == nullptr) continue;
      for (int64_t l = 0; l < c_.n_deepstack; ++l)
        std::copy_n(f + l * d, d, staging_.begin() + (l * R + r) * d);
      ++r;
    }
  b_.to_device(deepstack_, staging_.data(), staging_.size() * sizeof(float));
  ones_.assign(static_cast<size_t>(R), 1.0f);
}

void MediaRows::add(int64_t l, float* x) {
  if (rows_.empty()) return;
  const auto R = static_cast<int64_t>(rows_.size());
  const int64_t d = c_.n_embd;
  // Each row once, scaled by one: the sum is x + feature, as a plain add.
  b_.scatter_add_rows(x, deepstack_ + l * R * d, rows_.data(), ones_.data(), R, d);
}

}  // namespace ts

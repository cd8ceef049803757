#include "text/precompiled_charsmap.h"

#include <cstring>

#include "core/error.h"
#include "core/utf8.h"

namespace ts {

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, std::string source)
    : source_(std::move(source)) {
  if (blob.empty()) return;
  uint32_t trie_bytes = 0;
  if (blob.size() < sizeof(trie_bytes))
    fail(ErrorKind::Model, source_ + " is " + std::to_string(blob.size()) +
                               " bytes, shorter than its trie size header");
  std::memcpy(&trie_bytes, blob.data(), sizeof(trie_bytes));
  // The replacements follow the trie and hold at least one NUL (llama.cpp's check too).
  if (trie_bytes % 4 != 0 || trie_bytes == 0 ||
      static_cast<uint64_t>(trie_bytes) + sizeof(trie_bytes) >= blob.size())
    fail(ErrorKind::Model, source_ + ": the trie size " + std::to_string(trie_bytes) +
                               " does not fit the " + std::to_string(blob.size()) + " bytes");
  trie_.resize(trie_bytes / 4);
  std::memcpy(trie_.data(), blob.data() + sizeof(trie_bytes), trie_bytes);
  replacements_.assign(blob.substr(sizeof(trie_bytes) + trie_bytes));
  check_leaves();
}

namespace {

// Each unit packs (darts-clone's layout) BASE in bits 10-30 (shifted left 8 more when bit 9 is
// set), the LEAF flag in bit 8 and the label byte in bits 0-7 (bit 31 set on value units, so a
// value never passes as a label check). The child of a node by byte c is the unit at the node's
// position ^ c whose label is c; its own position is its index ^ its BASE, and a leaf's value
// (a replacement's offset) is the unit at that position.
uint32_t base(uint32_t u) {
  return (u >> 10) << ((u & (1U << 9)) >> 6);
}
bool is_leaf(uint32_t u) {
  return ((u >> 8) & 1) != 0;
}
uint32_t label(uint32_t u) {
  return u & ((1U << 31) | 0xFF);
}
uint32_t value(uint32_t u) {
  return u & ((1U << 31) - 1);
}

}  // namespace

// Every node the walk can reach, once: each leaf's value unit must lie in the trie and point at
// a terminated replacement, so that normalising never reads outside the blob. A child outside
// the trie is no child (the walk stops there too).
void PrecompiledCharsmap::check_leaves() const {
  std::vector<uint8_t> seen(trie_.size(), 0);
  std::vector<size_t> todo{base(trie_[0])};
  while (!todo.empty()) {
    const size_t position = todo.back();
    todo.pop_back();
    for (uint32_t c = 1; c < 256; ++c) {
      const size_t child = position ^ c;
      if (child >= trie_.size() || label(trie_[child]) != c || seen[child]) continue;
      seen[child] = 1;
      const size_t next = child ^ base(trie_[child]);
      if (is_leaf(trie_[child])) {
        if (next >= trie_.size())
          fail(ErrorKind::Model, source_ + ": a leaf's value unit " + std::to_string(next) +
                                     " is outside the trie's " + std::to_string(trie_.size()));
        const uint32_t offset = value(trie_[next]);
        if (offset >= replacements_.size() || replacements_.find('\0', offset) == std::string::npos)
          fail(ErrorKind::Model, source_ + ": replacement offset " + std::to_string(offset) +
                                     " has no terminated string in the blob");
      }
      todo.push_back(next);
    }
  }
}

PrecompiledCharsmap::Match PrecompiledCharsmap::longest_match(std::string_view text,
                                                              size_t pos) const {
  Match m;
  if (trie_.empty()) return m;
  size_t node = base(trie_[0]);
  size_t value_at = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= trie_.size() || label(trie_[node]) != c) break;
    const bool leaf = is_leaf(trie_[node]);
    node ^= base(trie_[node]);
    if (leaf) {
      m.consumed = i - pos + 1;
      value_at = value(trie_[node]);  // check_leaves: inside the trie, a terminated string
    }
  }
  if (m.consumed > 0) {
    const std::string_view r(replacements_);
    m.replacement = r.substr(value_at, r.find('\0', value_at) - value_at);
  }
  return m;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Match m = longest_match(text, pos);
    if (m.consumed > 0) {
      out.append(m.replacement);
      pos += m.consumed;
      continue;
    }
    const size_t len = utf8_char_length(text, pos);
    out.append(text.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace ts

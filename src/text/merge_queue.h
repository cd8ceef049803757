// The merge loop both BPE flavours share: start from the UTF-8 characters of a word, repeatedly
// join the adjacent pair with the lowest cost (ties: the leftmost pair), until no pair has a
// cost. SentencePiece costs a pair by minus the score of the joined piece, byte-level BPE by the
// rank of the merge rule; the pair is only a candidate when that piece / rule exists.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace ts {

// `text` must be valid UTF-8. cost(left, right) -> std::optional<double>.
template <class Cost>
std::vector<std::string_view> merge_pieces(std::string_view text, const Cost& cost) {
  struct Symbol {
    int32_t prev;
    int32_t next;
    size_t start;
    size_t len;  // 0 once merged into its left neighbour
  };
  struct Pair {
    double cost;
    int32_t left;
    int32_t right;
    size_t len;  // joined length when queued; a changed length means the entry is stale
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.cost > b.cost || (a.cost == b.cost && a.left > b.left);
    }
  };

  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < text.size();) {
    size_t n = utf8_valid_prefix(text, pos);
    if (n == 0) n = 1;  // callers validate; a stray byte still makes progress
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({i - 1, -1, pos, n});
    if (i > 0) sym[i - 1].next = i;
    pos += n;
  }

  std::priority_queue<Pair, std::vector<Pair>, Worse> queue;
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[right];
    if (const std::optional<double> c =
            cost(text.substr(l.start, l.len), text.substr(r.start, r.len)))
      queue.push({*c, left, right, l.len + r.len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }

  std::vector<std::string_view> out;
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next)
    out.push_back(text.substr(sym[i].start, sym[i].len));
  return out;
}

}  // namespace ts

#include "runtime/prompt_lookup.h"

#include <algorithm>

namespace ts {

std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int64_t max_tokens) {
  const auto L = static_cast<int64_t>(history.size());
  if (max_tokens <= 0 || L < kMinNgram + 1) return {};
  // One pass from the end: every earlier position holding the last token is the end of a
  // candidate, its match extended backwards up to kMaxNgram; the first of the longest wins.
  int64_t best_end = -1, best_len = kMinNgram - 1;
  for (int64_t end = L - 2; end >= 0 && best_len < kMaxNgram; --end) {
    if (history[end] != history[L - 1]) continue;
    int64_t len = 1;
    while (len < kMaxNgram && end - len >= 0 && history[end - len] == history[L - 1 - len]) ++len;
    if (len > best_len) best_len = len, best_end = end;
  }
  if (best_end < 0) return {};
  const int64_t from = best_end + 1, to = std::min(L, from + max_tokens);
  return {history.begin() + from, history.begin() + to};
}

}  // namespace ts

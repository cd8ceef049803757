// Prompt lookup decoding's draft: text that repeats what came before (code being edited, a
// document quoted or summarised, a list continued) is guessed from that earlier text, with no
// draft model. The generator feeds the guess with the sampled token and checks it against what
// it samples from each row, so the draft decides only how many tokens one forward pass yields.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ts {

// The tokens that followed the most recent earlier occurrence of the longest suffix of `history`
// of kMinNgram to kMaxNgram tokens (ties: the most recent), at most max_tokens of them; none if
// no such suffix occurred before.
std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int64_t max_tokens);

// The most guesses one pass takes (each is a row of every logits buffer sized for it).
constexpr int64_t kMaxLookup = 64;
constexpr int kMinNgram = 2;  // a single token repeats too often to predict what follows it
constexpr int kMaxNgram = 4;

}  // namespace ts

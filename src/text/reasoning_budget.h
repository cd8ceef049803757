// --reasoning-budget N: a thinking model's reasoning ends after N tokens. Once the reasoning has
// run N tokens, the tokens of its end marker are forced, one per step (every other logit masked),
// and the model goes on with its reply, as llama.cpp's reasoning budget does. The reasoning is
// what follows the opening marker (<think>, or harmony's analysis message), in the answer or at
// the end of the prompt, up to the end marker the model writes itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

class Tokenizer;
class ChatTemplate;

// A model's reasoning markers, and the end marker's tokens to force.
struct ReasoningMarkers {
  std::string open;                   // "<think>"
  std::string close;                  // "</think>"
  std::vector<int32_t> close_tokens;  // what is forced: "\n</think>\n\n" encoded
  bool empty() const { return open.empty(); }
};

// The markers of `chat`'s model (none when it does not think): <think> blocks, or harmony's
// analysis channel (closed by ending the message and opening the final one).
ReasoningMarkers reasoning_markers(const ChatTemplate& chat, const Tokenizer& tok);

class ReasoningBudget {
 public:
  // `budget` < 0: unlimited. `open`: the prompt left the model in its reasoning.
  ReasoningBudget(const ReasoningMarkers* markers, int64_t budget, bool open);

  // Whether the budget still watches the answer (false: no budget, or the reasoning is over).
  bool active() const { return state_ != State::After; }
  // The token that must come next, or -1.
  int32_t forced() const;
  // Masks `logits` to the forced token, if any.
  void mask(std::span<float> logits) const;
  // Follows a generated token and its text (control tokens spelled out).
  void advance(int32_t token, std::string_view text);

 private:
  enum class State { Before, Reasoning, Forcing, After };
  const ReasoningMarkers* m_;
  int64_t budget_;
  State state_;
  int64_t spent_ = 0;
  size_t forced_ = 0;  // close tokens forced so far
  std::string tail_;   // the last bytes, to find a marker cut across tokens
};

}  // namespace ts

// gpt-oss's harmony format, read back from an answer: the answer is a run of messages, each a
// header (<|channel|>NAME and perhaps a recipient) then <|message|> and its text up to <|end|>
// (or <|return|> / <|call|>, which end the generation). The analysis channel is the model's
// reasoning, the final channel (and commentary without a recipient: a preamble to a call) its
// reply; headers are neither. The markers are control tokens, so the text must be generated with
// them shown (ToolFormat::preserved_tokens). Text that is not in harmony form at all (a model
// that ignores it) is reply, so nothing the model says is lost.
#pragma once

#include <string>
#include <string_view>

#include "text/reasoning.h"

namespace ts {

// Whether a chat template writes harmony (gpt-oss's template).
bool template_writes_harmony(std::string_view source);
// The channel a prompt leaves the model writing in ("" : in a header, where the model starts
// after "<|start|>assistant"); a prefill ends inside a message, after "<|message|>".
std::string harmony_open_channel(std::string_view prompt);

class HarmonySplitter final : public AnswerSplitter {
 public:
  explicit HarmonySplitter(std::string open_channel = "");

  Parts feed(std::string_view piece) override;
  Parts finish() override;

 private:
  void run(Parts& out, bool at_end);
  void give(Parts& out, std::string_view text) const;

  bool in_message_;
  std::string channel_;
  std::string held_;    // header text, or message text that could still begin a marker
  bool plain_ = false;  // the answer is not in harmony form: all of it is reply
};

}  // namespace ts

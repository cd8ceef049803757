// A chat answer printed as it streams. For a thinking model (ChatTemplate::thinks) the <think>
// block is split off (text/reasoning.h), for gpt-oss (ChatTemplate::harmony) the analysis channel
// (text/harmony.h), and printed dimmed on a terminal, or not at all with --reasoning hide; the
// reply is printed as is. Both parts are kept for the conversation's history.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "text/chat_template.h"
#include "text/reasoning.h"

namespace ts::cli {

class ThinkingOutput {
 public:
  // `split`: the model thinks; `open`: the prompt opened the block; `show`: print the reasoning.
  ThinkingOutput(bool split, bool open, bool show, std::FILE* out);
  // The splitter `chat`'s answers to `prompt` need (none when the model does not think).
  ThinkingOutput(const ChatTemplate& chat, const std::string& prompt, bool show, std::FILE* out);

  void write(const std::string& piece);
  void finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  void print(const AnswerSplitter::Parts& parts);

  std::unique_ptr<AnswerSplitter> splitter_;
  bool show_;
  bool dim_;
  std::FILE* out_;
  std::string reasoning_;
  std::string content_;
};

}  // namespace ts::cli

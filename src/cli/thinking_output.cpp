#include "cli/thinking_output.h"

#include <unistd.h>

#include "text/harmony.h"

namespace ts::cli {

ThinkingOutput::ThinkingOutput(bool split, bool open, bool show, std::FILE* out)
    : show_(show), dim_(::isatty(::fileno(out)) != 0), out_(out) {
  if (split) splitter_ = std::make_unique<ReasoningSplitter>(open);
}

ThinkingOutput::ThinkingOutput(const ChatTemplate& chat, const std::string& prompt, bool show,
                               std::FILE* out)
    : ThinkingOutput(chat.thinks(), prompt_opens_thinking(prompt), show, out) {
  if (chat.harmony()) splitter_ = std::make_unique<HarmonySplitter>(harmony_open_channel(prompt));
}

void ThinkingOutput::write(const std::string& piece) {
  if (splitter_) {
    print(splitter_->feed(piece));
    return;
  }
  content_ += piece;
  std::fwrite(piece.data(), 1, piece.size(), out_);
  std::fflush(out_);
}

void ThinkingOutput::finish() {
  if (splitter_) print(splitter_->finish());
}

void ThinkingOutput::print(const AnswerSplitter::Parts& parts) {
  if (!parts.reasoning.empty() && show_) {
    // Dimmed (SGR 2) on a terminal; the reply follows after a blank line.
    std::fputs(dim_ ? "\033[2m" : "", out_);
    std::fwrite(parts.reasoning.data(), 1, parts.reasoning.size(), out_);
    std::fputs(dim_ ? "\033[0m" : "", out_);
  }
  if (!parts.content.empty()) {
    if (content_.empty() && !reasoning_.empty() && show_) std::fputs("\n\n", out_);
    std::fwrite(parts.content.data(), 1, parts.content.size(), out_);
  }
  reasoning_ += parts.reasoning;
  content_ += parts.content;
  std::fflush(out_);
}

}  // namespace ts::cli

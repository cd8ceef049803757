#include "text/harmony.h"

#include <array>

namespace ts {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
// What ends a message: its end markers, or the header of the next one.
constexpr std::array<std::string_view, 5> kMessageEnds = {"<|end|>", "<|return|>", "<|call|>",
                                                          "<|start|>", "<|channel|>"};

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Where the first message end in `text` is, and its length; npos when none.
size_t find_end(std::string_view text, size_t& length) {
  size_t best = std::string_view::npos;
  for (std::string_view m : kMessageEnds)
    if (const size_t at = text.find(m); at < best) best = at, length = m.size();
  return best;
}

// The length of the longest suffix of `text` that could still grow into a marker ("<", "<|e").
size_t partial_marker(std::string_view text) {
  const size_t lt = text.rfind('<');
  if (lt == std::string_view::npos || text.size() - lt > 12) return 0;
  const std::string_view tail = text.substr(lt);
  for (std::string_view m : kMessageEnds)
    if (m.substr(0, tail.size()) == tail) return tail.size();
  return 0;
}

// The channel a header names ("<|start|>assistant<|channel|>final" : "final").
std::string header_channel(std::string_view header) {
  const size_t at = header.rfind(kChannel);
  if (at == std::string_view::npos) return "";
  size_t from = at + kChannel.size(), to = from;
  while (to < header.size() && !space(header[to]) && header[to] != '<') ++to;
  return std::string(header.substr(from, to - from));
}

}  // namespace

bool template_writes_harmony(std::string_view source) {
  return source.find("<|channel|>") != std::string_view::npos &&
         source.find("<|message|>") != std::string_view::npos;
}

std::string harmony_open_channel(std::string_view prompt) {
  const size_t message = prompt.rfind(kMessage);
  if (message == std::string_view::npos) return "";
  const std::string_view after = prompt.substr(message + kMessage.size());
  size_t length = 0;
  if (find_end(after, length) != std::string_view::npos) return "";  // that message ended
  const size_t start = prompt.rfind("<|start|>", message);
  return header_channel(prompt.substr(start == std::string_view::npos ? 0 : start,
                                      message - (start == std::string_view::npos ? 0 : start)));
}

HarmonySplitter::HarmonySplitter(std::string open_channel)
    : in_message_(!open_channel.empty()), channel_(std::move(open_channel)) {}

AnswerSplitter::Parts HarmonySplitter::feed(std::string_view piece) {
  held_ += piece;
  Parts out;
  run(out, false);
  return out;
}

AnswerSplitter::Parts HarmonySplitter::finish() {
  Parts out;
  run(out, true);
  return out;
}

void HarmonySplitter::give(Parts& out, std::string_view text) const {
  (channel_ == "analysis" ? out.reasoning : out.content) += text;
}

void HarmonySplitter::run(Parts& out, bool at_end) {
  while (!held_.empty()) {
    if (plain_) {
      out.content += held_;
      held_.clear();
      return;
    }
    if (!in_message_) {
      // A header runs to <|message|>; an answer that opens with anything but a marker is not
      // in harmony form.
      size_t first = 0;
      while (first < held_.size() && space(held_[first])) ++first;
      const std::string_view rest = std::string_view(held_).substr(first);
      if ((!rest.empty() && rest[0] != '<') || (rest.size() >= 2 && rest[1] != '|')) {
        plain_ = true;
        continue;
      }
      const size_t message = held_.find(kMessage);
      if (message == std::string::npos) {
        if (at_end) held_.clear();  // a header with no message: nothing to show
        return;
      }
      channel_ = header_channel(std::string_view(held_).substr(0, message));
      held_.erase(0, message + kMessage.size());
      in_message_ = true;
      continue;
    }
    size_t length = 0;
    const size_t end = find_end(held_, length);
    if (end != std::string::npos) {
      give(out, std::string_view(held_).substr(0, end));
      // <|start|> and <|channel|> open the next header; the end markers are dropped.
      const bool header =
          held_.compare(end, 2, "<|") == 0 && (held_.compare(end, 9, "<|start|>") == 0 ||
                                               held_.compare(end, kChannel.size(), kChannel) == 0);
      held_.erase(0, header ? end : end + length);
      in_message_ = false;
      continue;
    }
    const size_t keep = at_end ? 0 : partial_marker(held_);
    give(out, std::string_view(held_).substr(0, held_.size() - keep));
    held_.erase(0, held_.size() - keep);
    return;
  }
}

}  // namespace ts

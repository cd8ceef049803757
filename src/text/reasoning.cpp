#include "text/reasoning.h"

#include <algorithm>

namespace ts {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t skip_space(std::string_view s, size_t from = 0) {
  while (from < s.size() && space(s[from])) ++from;
  return from;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

bool prompt_opens_thinking(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && space(prompt[end - 1])) --end;
  return end >= kOpen.size() && prompt.substr(end - kOpen.size(), kOpen.size()) == kOpen;
}

ReasoningSplitter::Parts ReasoningSplitter::feed(std::string_view piece) {
  held_ += piece;
  Parts out;
  run(out, false);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::finish() {
  Parts out;
  run(out, true);
  return out;
}

void ReasoningSplitter::run(Parts& out, bool at_end) {
  while (true) {
    switch (state_) {
      case State::Start: {
        // An answer that opens with <think> (after whitespace) thinks first; any other is reply.
        const size_t at = skip_space(held_);
        const std::string_view rest = std::string_view(held_).substr(at);
        if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, at + kOpen.size());
          state_ = State::Reasoning;
          continue;
        }
        if (!at_end && kOpen.substr(0, rest.size()) == rest) return;  // maybe the tag, unfinished
        state_ = State::Content;
        continue;
      }
      case State::Reasoning: {
        // Whitespace before the first word of the reasoning is dropped.
        const size_t start = out_started_ ? 0 : skip_space(held_);
        if (start == held_.size() && !at_end) return;  // only whitespace yet
        const size_t close = held_.find(kClose, start);
        if (close != std::string::npos) {
          size_t end = close;
          while (end > start && space(held_[end - 1])) --end;
          out.reasoning += held_.substr(start, end - start);
          held_.erase(0, close + kClose.size());
          state_ = State::AfterReasoning;
          continue;
        }
        // Hold back a possible start of </think> and the whitespace before it.
        size_t keep = at_end ? 0 : partial_tag_suffix(held_, kClose);
        size_t end = held_.size() - keep;
        while (end > start && space(held_[end - 1])) --end;
        out.reasoning += held_.substr(start, end - start);
        out_started_ = out_started_ || end > start;
        if (at_end)
          held_.clear();
        else
          held_.erase(0, end);
        return;
      }
      case State::AfterReasoning: {
        // The reply starts after the whitespace that follows </think>.
        const size_t at = skip_space(held_);
        if (at == held_.size() && !at_end) {
          held_.clear();
          return;
        }
        held_.erase(0, at);
        state_ = State::Content;
        continue;
      }
      case State::Content:
        out.content += held_;
        held_.clear();
        return;
    }
  }
}

}  // namespace ts

#include "text/reasoning_budget.h"

#include <algorithm>
#include <limits>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts {

ReasoningMarkers reasoning_markers(const ChatTemplate& chat, const Tokenizer& tok) {
  ReasoningMarkers m;
  if (chat.harmony()) {
    m.open = "<|channel|>analysis<|message|>";
    m.close = "<|end|>";
    m.close_tokens =
        tok.encode("<|end|><|start|>assistant<|channel|>final<|message|>", false, true);
  } else if (chat.thinks()) {
    m.open = "<think>";
    m.close = "</think>";
    m.close_tokens = tok.encode("\n</think>\n\n", false, true);
  }
  return m;
}

ReasoningBudget::ReasoningBudget(const ReasoningMarkers* markers, int64_t budget, bool open)
    : m_(markers), budget_(budget), state_(open ? State::Reasoning : State::Before) {
  if (m_ == nullptr || m_->empty() || budget_ < 0) state_ = State::After;
  if (state_ == State::Reasoning && budget_ == 0) state_ = State::Forcing;
}

int32_t ReasoningBudget::forced() const {
  if (state_ != State::Forcing || forced_ >= m_->close_tokens.size()) return -1;
  return m_->close_tokens[forced_];
}

void ReasoningBudget::mask(std::span<float> logits) const {
  const int32_t f = forced();
  if (f < 0 || static_cast<size_t>(f) >= logits.size()) return;
  const float keep = logits[static_cast<size_t>(f)];
  std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  logits[static_cast<size_t>(f)] = keep;
}

void ReasoningBudget::advance(int32_t token, std::string_view text) {
  switch (state_) {
    case State::After:
      return;
    case State::Forcing:
      if (token == forced() && ++forced_ == m_->close_tokens.size()) state_ = State::After;
      return;
    case State::Before:
    case State::Reasoning: {
      const bool reasoning = state_ == State::Reasoning;
      tail_ += text;
      const std::string& marker = reasoning ? m_->close : m_->open;
      if (const size_t at = tail_.find(marker); at != std::string::npos) {
        state_ = reasoning ? State::After : State::Reasoning;
        tail_.erase(0, at + marker.size());
        if (state_ == State::Reasoning && budget_ == 0) state_ = State::Forcing;
        return;
      }
      // Only a marker's worth of bytes is needed to find one cut across tokens.
      const size_t keep = std::max(m_->open.size(), m_->close.size());
      if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
      if (reasoning && ++spent_ >= budget_) state_ = State::Forcing;
      return;
    }
  }
}

}  // namespace ts

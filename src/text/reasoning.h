// A thinking model's answer split into its reasoning and its reply: the text between <think> and
// </think> (DeepSeek R1, Qwen3, QwQ, SmolLM3, GLM, ...) is the reasoning. Text arrives in pieces
// and a tag may be cut between two of them, so the splitter holds back what could still become
// one. Whitespace around the reasoning (the newlines after <think> and around </think>) belongs to
// neither part, as in llama.cpp's reasoning_content.
#pragma once

#include <string>
#include <string_view>

namespace ts {

// An answer's text, as it streams, split into reasoning and reply: ReasoningSplitter for <think>
// blocks, HarmonySplitter (text/harmony.h) for gpt-oss's channels.
class AnswerSplitter {
 public:
  struct Parts {
    std::string reasoning;
    std::string content;
  };
  virtual ~AnswerSplitter() = default;
  // The parts `piece` completes (either may be empty).
  virtual Parts feed(std::string_view piece) = 0;
  // What was held back, at the end of the answer.
  virtual Parts finish() = 0;
};

// Whether a rendered prompt leaves the model inside a thinking block: it ends with <think> (and
// whitespace), as the templates of DeepSeek R1 and of Qwen3 with thinking forced write it.
bool prompt_opens_thinking(std::string_view prompt);

class ReasoningSplitter final : public AnswerSplitter {
 public:
  // `open`: the prompt already opened the thinking block (prompt_opens_thinking).
  explicit ReasoningSplitter(bool open) : state_(open ? State::Reasoning : State::Start) {}

  Parts feed(std::string_view piece) override;
  // A thinking block never closed is reasoning.
  Parts finish() override;

 private:
  enum class State { Start, Reasoning, AfterReasoning, Content };
  void run(Parts& out, bool at_end);

  State state_;
  std::string held_;          // text not yet assigned to a part
  bool out_started_ = false;  // some reasoning has been given out
};

}  // namespace ts

// The reasoning splitter: <think>...</think> taken out of an answer however the text is cut into
// pieces, whitespace around the reasoning dropped, answers without thinking left alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/reasoning.h"

namespace ts {
namespace {

ReasoningSplitter::Parts split(const std::vector<std::string>& pieces, bool open) {
  ReasoningSplitter s(open);
  ReasoningSplitter::Parts all;
  auto add = [&](const ReasoningSplitter::Parts& p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (const std::string& p : pieces) add(s.feed(p));
  add(s.finish());
  return all;
}

// Every way of cutting `text` into two or three pieces gives the same parts as the whole.
void expect_split(const std::string& text, bool open, const std::string& reasoning,
                  const std::string& content) {
  for (size_t i = 0; i <= text.size(); ++i)
    for (size_t j = i; j <= text.size(); ++j) {
      const auto p = split({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, open);
      ASSERT_EQ(p.reasoning, reasoning) << "cut at " << i << ", " << j << " of " << text;
      ASSERT_EQ(p.content, content) << "cut at " << i << ", " << j << " of " << text;
    }
}

TEST(Reasoning, SplitsThinkingFromTheReply) {
  expect_split("<think>\nLet me see: 2 + 2.\n</think>\n\nIt is 4.", false, "Let me see: 2 + 2.",
               "It is 4.");
  // The template opened the block: the answer starts inside it.
  expect_split("17 is prime </think>Yes.", true, "17 is prime", "Yes.");
  // No thinking at all, or text that only looks like a tag later on.
  expect_split("Plain answer with <think> inside.", false, "", "Plain answer with <think> inside.");
  expect_split("<thinking is fine>", false, "", "<thinking is fine>");
  // Never closed (cut by max_tokens): all of it is reasoning.
  expect_split("<think>still going <", false, "still going <", "");
  expect_split("a  b\n\nc</think>", true, "a  b\n\nc", "");
  expect_split("<think></think>Direct.", false, "", "Direct.");
}

TEST(Reasoning, PromptOpensThinking) {
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace ts

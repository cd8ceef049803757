// gpt-oss's harmony answers split into reasoning (the analysis channel) and reply (final, and a
// preamble in commentary), however the text is cut into pieces: headers and markers belong to
// neither; an answer not in harmony form is all reply; a prefill's open channel is continued;
// the real template's prompts say which channel they leave open.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "text/chat_template.h"
#include "text/harmony.h"

namespace ts {
namespace {

AnswerSplitter::Parts split(const std::vector<std::string>& pieces, const std::string& channel) {
  HarmonySplitter s(channel);
  AnswerSplitter::Parts all;
  const auto add = [&](const AnswerSplitter::Parts& p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (const std::string& p : pieces) add(s.feed(p));
  add(s.finish());
  return all;
}

// Every way of cutting `text` into three pieces gives the same parts as the whole.
void expect_split(const std::string& text, const std::string& channel, const std::string& reasoning,
                  const std::string& content) {
  for (size_t i = 0; i <= text.size(); i += 3)
    for (size_t j = i; j <= text.size(); j += 5) {
      const auto p = split({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, channel);
      ASSERT_EQ(p.reasoning, reasoning) << "cut at " << i << ", " << j << ": " << text;
      ASSERT_EQ(p.content, content) << "cut at " << i << ", " << j << ": " << text;
    }
}

TEST(Harmony, SplitsTheChannels) {
  expect_split(
      "<|channel|>analysis<|message|>The user wants 2+2.<|end|><|start|>assistant<|channel|>"
      "final<|message|>It is 4.",
      "", "The user wants 2+2.", "It is 4.");
  // A preamble before a call is reply; the call's own header (cut at its recipient, where the
  // server reads the call) is neither.
  expect_split(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
      "<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary",
      "", "Need weather.", "Let me check.");
  // Text that is not harmony at all is the reply, whole.
  expect_split("Plain words <|end|> and more", "", "", "Plain words <|end|> and more");
  // A prefill left the final channel open.
  expect_split("continued.<|return|>", "final", "", "continued.");
  // An analysis never ended (a length limit) is reasoning.
  expect_split("<|channel|>analysis<|message|>Thinking <|en", "", "Thinking <|en", "");
}

TEST(Harmony, PromptsOpenChannel) {
  EXPECT_EQ(harmony_open_channel("<|start|>user<|message|>hi<|end|><|start|>assistant"), "");
  EXPECT_EQ(
      harmony_open_channel(
          "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>Hel"),
      "final");
  std::ifstream f(test::fixtures_dir() + "/chat_templates/openai-gpt-oss-120b.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  const ChatTemplate t = ChatTemplate::jinja(ss.str(), {"<|startoftext|>", "<|return|>", false});
  ASSERT_TRUE(t.harmony());
  ChatOptions options;
  options.kwargs["reasoning_effort"] = "high";
  const std::string prompt = t.apply({{"system", "Be brief."}, {"user", "Hi"}}, options);
  EXPECT_NE(prompt.find("Reasoning: high"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.substr(prompt.size() - 18), "<|start|>assistant") << prompt;
  EXPECT_EQ(harmony_open_channel(prompt), "");
  // An earlier assistant turn's reasoning_content goes where the template reads it ("thinking").
  ChatMessage call{"assistant", ""};
  call.reasoning_content = "Weather needs a tool.";
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])");
  ChatMessage result{"tool", "{\"temp\": 20}"};
  const std::string with_call = t.apply({{"user", "Weather?"}, call, result}, options);
  EXPECT_NE(with_call.find("<|channel|>analysis<|message|>Weather needs a tool.<|end|>"),
            std::string::npos)
      << with_call;
  EXPECT_NE(with_call.find("to=functions.get_weather<|channel|>commentary json<|message|>"),
            std::string::npos)
      << with_call;
}

}  // namespace
}  // namespace ts

// Chat formats: recognition of real templates by their markers, the exact text each format
// writes (the expected strings are what the models' own Jinja templates render for the same
// conversation, checked with jinja2, minus the leading BOS that encode() adds), selection rules
// and the errors for unknown names, unrecognised templates and malformed conversations.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "test_paths.h"
#include "text/chat_template.h"

namespace {

using ts::ChatFormat;
using ts::ChatMessage;
using ts::ChatTemplate;

// SmolLM2-135M-Instruct's template (from its GGUF).
const char* kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
    "}}{% endif %}";
const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ "
    "content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const char* kLlama2Template =
    "{% if messages[0]['role'] == 'system' %}...{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}...{{ bos_token + '[INST] ' + content.strip() + ' "
    "[/INST]' }}";
const char* kMistralTemplate =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + "
    "eos_token}}{% endif %}{% endfor %}";
const char* kGemmaTemplate =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}...{{ '<start_of_turn>' + role + "
    "'\n' + "
    "(first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ "
    "'<end_of_turn>\n' }}";
const char* kTekkenTemplate =
    "{%- if messages[0]['role'] == 'system' %}[SYSTEM_PROMPT]...[INST]{{ content }}[/INST]";

std::vector<ChatMessage> conversation(bool with_system) {
  std::vector<ChatMessage> m;
  if (with_system) m.push_back({"system", "Be brief."});
  m.push_back({"user", " Hi! "});
  m.push_back({"assistant", "Hello."});
  m.push_back({"user", "Sky?"});
  return m;
}

TEST(ChatTemplate, RecognisesRealTemplatesByTheirMarkers) {
  EXPECT_EQ(ChatTemplate::recognise(kSmolTemplate).format(), ChatFormat::ChatML);
  EXPECT_EQ(ChatTemplate::recognise(kLlama3Template).format(), ChatFormat::Llama3);
  EXPECT_EQ(ChatTemplate::recognise(kLlama2Template).format(), ChatFormat::Llama2);
  EXPECT_EQ(ChatTemplate::recognise(kMistralTemplate).format(), ChatFormat::Mistral);
  EXPECT_EQ(ChatTemplate::recognise(kGemmaTemplate).format(), ChatFormat::Gemma);
}

TEST(ChatTemplate, UnrecognisedTemplateIsAnErrorNotAReplacement) {
  for (const char* src : {kTekkenTemplate, "{{ messages[0]['content'] }} ### Response:"}) {
    try {
      ChatTemplate::recognise(src);
      FAIL() << "accepted: " << src;
    } catch (const ts::Error& e) {
      EXPECT_EQ(e.kind(), ts::ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find("--chat-template"), std::string::npos) << e.what();
    }
  }
}

TEST(ChatTemplate, ChatMLMatchesSmolLM2Template) {
  const ChatTemplate t = ChatTemplate::by_name("chatml");
  EXPECT_EQ(t.apply(conversation(true), true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi! "
            "<|im_end|>\n<|im_start|>assistant\n"
            "Hello.<|im_end|>\n<|im_start|>user\nSky?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply({{"user", "x"}}, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(
      ChatTemplate::by_name("llama3").apply(conversation(true), true),
      "<|start_header_id|>system<|end_header_id|>\n\nBe "
      "brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
      "\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_"
      "header_id|>"
      "user<|end_header_id|>\n\nSky?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2) {
  const ChatTemplate t = ChatTemplate::by_name("llama2");
  EXPECT_EQ(
      t.apply(conversation(true), true),
      "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi! [/INST] Hello. </s><s>[INST] Sky? [/INST]");
  EXPECT_EQ(t.apply(conversation(false), true),
            "[INST] Hi! [/INST] Hello. </s><s>[INST] Sky? [/INST]");
}

TEST(ChatTemplate, Mistral) {
  const ChatTemplate t = ChatTemplate::by_name("mistral");
  EXPECT_EQ(t.apply(conversation(false), true),
            "[INST]  Hi!  [/INST]Hello.</s>[INST] Sky? [/INST]");
  EXPECT_EQ(t.apply(conversation(true), true),
            "[INST] Be brief.\n\n Hi!  [/INST]Hello.</s>[INST] Sky? [/INST]");
}

TEST(ChatTemplate, Gemma) {
  const ChatTemplate t = ChatTemplate::by_name("gemma");
  EXPECT_EQ(t.apply(conversation(true), true),
            "<start_of_turn>user\nBe "
            "brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nSky?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(conversation(false), false),
            "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nSky?<end_of_turn>\n");
}

TEST(ChatTemplate, RawJoinsContents) {
  EXPECT_EQ(ChatTemplate::by_name("raw").apply(
                {{"user", "In the morning,"}, {"assistant", "the children"}}, true),
            "In the morning, the children");
}

TEST(ChatTemplate, MalformedConversationsAreInputErrors) {
  const auto expect_input_error = [](const char* name, const std::vector<ChatMessage>& m) {
    try {
      ChatTemplate::by_name(name).apply(m, true);
      FAIL() << name;
    } catch (const ts::Error& e) {
      EXPECT_EQ(e.kind(), ts::ErrorKind::Input) << e.what();
    }
  };
  expect_input_error("gemma", {{"assistant", "first"}});
  expect_input_error("llama2", {{"user", "a"}, {"user", "b"}});
  expect_input_error("mistral", {{"user", "a"}, {"system", "late"}});
  expect_input_error("llama3", {{"tool", "x"}});
}

TEST(ChatTemplate, SelectionOrder) {
  EXPECT_EQ(ts::select_chat_template("gemma", kSmolTemplate, "llama", "m").format(),
            ChatFormat::Gemma);
  // The model's own template runs.
  EXPECT_EQ(ts::select_chat_template("", kSmolTemplate, "llama", "m").format(), ChatFormat::Jinja);
  // One the engine cannot read falls back to the format its markers name, saying why.
  const ChatTemplate fallback =
      ts::select_chat_template("", "{% include 'x' %}<|im_start|>{{ message }}", "llama", "m");
  EXPECT_EQ(fallback.format(), ChatFormat::ChatML);
  EXPECT_NE(fallback.describe().find("unsupported tag"), std::string::npos) << fallback.describe();
  // Neither readable nor recognised: the engine's error.
  EXPECT_THROW(ts::select_chat_template("", "{% include 'x' %}", "llama", "m"), ts::Error);
  EXPECT_EQ(ts::select_chat_template("", "", "qwen3moe", "m").format(), ChatFormat::ChatML);
  EXPECT_EQ(ts::select_chat_template("", "", "qwen3vlmoe", "m").format(), ChatFormat::ChatML);
  EXPECT_EQ(ts::select_chat_template("", "", "gemma3", "m").format(), ChatFormat::Gemma);
  try {
    ts::select_chat_template("", "", "llama", "tiny.gguf");
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("tiny.gguf"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate::by_name("vicuna");
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("chatml"), std::string::npos) << e.what();
  }
}

// SmolLM2's own template adds its default system prompt, which the ChatML format does not: the
// prompt the model was trained on (issue 37's 31 tokens, not 10).
TEST(ChatTemplate, ModelTemplateRunsAsJinja) {
  // SmolLM2's BOS is <|im_start|>, which its tokenizer does not add: the text keeps it.
  const ChatTemplate t = ts::select_chat_template("", kSmolTemplate, "llama", "m",
                                                  {"<|im_start|>", "<|im_end|>", false});
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.describe(), "the model's template (jinja)");
  EXPECT_FALSE(t.renders_tools());
  // A leading BOS the template writes is left to the tokenizer (add_bos).
  const ChatTemplate llama =
      ts::select_chat_template("", kLlama3Template, "llama", "m", {"<|begin_of_text|>", "", true});
  EXPECT_EQ(llama.apply({{"user", " Hi "}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  // Template variables from chat_template_kwargs, and the template's own errors.
  const ChatTemplate thinking = ChatTemplate::jinja(
      "{% if enable_thinking is false %}/no_think {% endif %}{{ messages[0].content }}"
      "{% if messages | length > 1 %}{{ raise_exception('one message only') }}{% endif %}",
      {});
  ts::ChatOptions options;
  options.kwargs["enable_thinking"] = false;
  EXPECT_EQ(thinking.apply({{"user", "x"}}, options), "/no_think x");
  try {
    thinking.apply({{"user", "x"}, {"user", "y"}}, true);
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("one message only"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, JinjaFileOverride) {
  const std::string path = ts::test::scratch_path("override.jinja");
  std::ofstream(path) << "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
  const ChatTemplate t = ts::select_chat_template(path, kSmolTemplate, "llama", "m");
  EXPECT_EQ(t.format(), ChatFormat::Jinja);
  EXPECT_EQ(t.apply({{"user", "a"}, {"assistant", "b"}}, true), "[user]a[assistant]b");
  EXPECT_THROW(ts::select_chat_template(path + ".missing.jinja", "", "llama", "m"), ts::Error);
}

TEST(ChatTemplate, ReadsHfDirectoryTemplates) {
  const std::string dir = ts::test::scratch_path("chat_hf");
  ASSERT_EQ(ts::test::run_command("rm -rf " + dir + " && mkdir -p " + dir), 0);
  EXPECT_EQ(ts::hf_chat_template(dir), "");
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "<|im_start|>"}]})";
  EXPECT_EQ(ts::hf_chat_template(dir), "<|im_start|>");
  std::ofstream(dir + "/chat_template.jinja") << "<start_of_turn>";
  EXPECT_EQ(ts::hf_chat_template(dir), "<start_of_turn>");
  // The fixture tokenizer (a base model) has none.
  EXPECT_EQ(ts::hf_chat_template(ts::test::fixtures_dir() + "/tokenizer"), "");
}

}  // namespace

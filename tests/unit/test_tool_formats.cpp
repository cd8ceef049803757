// The tool-call formats of the model families (constrain/tool_format.h): each real template in
// tests/fixtures/chat_templates/ is recognised as its family's format; a conversation whose
// assistant turn made calls, rendered by that template, reads back as those calls (the parser
// reads what the model was taught to write); what the model writes in its own form reads too;
// the constrained formats' envelopes accept the template's spelling and their random walks end in
// calls that parse and fit their schemas; hostile text never throws.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../fuzz/tool_calls_harness.h"
#include "constrain/tool_calls.h"
#include "constrain/tool_format.h"
#include "core/error.h"
#include "server/chat_prompt.h"
#include "test_paths.h"
#include "text/chat_template.h"

namespace ts {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(test::fixtures_dir() + "/chat_templates/" + name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Tool tool(const std::string& name, const json& parameters) {
  return {name, "does " + name, parameters,
          std::make_shared<const JsonSchema>(JsonSchema::compile(parameters))};
}

const json kWeather = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false})");
const json kTime = json::parse(R"({"type": "object", "properties": {"tz": {"type": "string",
    "maxLength": 8}}, "required": ["tz"]})");

ToolSet tools() {
  return ToolSet({tool("get_weather", kWeather), tool("get_time", kTime), tool("get", kTime)});
}

struct Case {
  const char* file;
  const char* format;
  bool parallel;  // the template writes several calls in one message
};

const Case kCases[] = {
    {"Qwen-Qwen3-0.6B.jinja", "hermes", true},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", true},
    {"Qwen3-Coder.jinja", "qwen3_xml", true},
    {"Qwen3.5-4B.jinja", "qwen3_xml", true},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral", true},
    {"unsloth-mistral-Devstral-Small-2507.jinja", "mistral", true},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral_nemo", true},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3", false},
    {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3", false},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek_v3", true},
    {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v3_1", true},
    {"openai-gpt-oss-120b.jinja", "harmony", false},
};

ordered call(const std::string& id, const std::string& name, const ordered& args) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

// The conversation up to an assistant turn that made `calls`, rendered without a generation
// prompt: the template's own spelling of the calls.
std::string render_calls(const std::string& file, const ordered& calls) {
  const ChatTemplate t = ChatTemplate::jinja(read_template(file), {"<s>", "</s>", false});
  ChatMessage user{"user", "What is the weather in Paris?"};
  ChatMessage assistant{"assistant", ""};
  assistant.tool_calls = calls;
  ChatOptions options;
  options.add_generation_prompt = false;
  options.tools = ordered::array();
  const ToolSet set = tools();
  for (const Tool& x : set.tools())
    options.tools.push_back({{"type", "function"},
                             {"function",
                              {{"name", x.name},
                               {"description", x.description},
                               {"parameters", ordered::parse(x.parameters.dump())}}}});
  return t.apply({user, assistant}, options);
}

// The text from the format's opening marker on, as the answer would hold it after the marker:
// the marker before the first call (the tools' section of the prompt may quote it too).
std::string after_open(const std::string& rendered, const ToolFormat& format) {
  const size_t user = rendered.rfind("What is the weather in Paris?");
  const size_t open = user == std::string::npos ? user : rendered.find(format.open(), user);
  EXPECT_NE(open, std::string::npos) << rendered;
  return open == std::string::npos ? "" : rendered.substr(open + format.open().size());
}

TEST(ToolFormats, RecognisedFromTheRealTemplates) {
  for (const Case& c : kCases)
    EXPECT_EQ(tool_format_for_template(read_template(c.file)).name(), c.format) << c.file;
  const ChatTemplate t = ChatTemplate::jinja(read_template("Qwen3-Coder.jinja"), {});
  EXPECT_TRUE(t.renders_tools());
  EXPECT_EQ(t.tool_format().name(), "qwen3_xml");
  EXPECT_TRUE(ChatTemplate::jinja(read_template("openai-gpt-oss-120b.jinja"), {}).harmony());
  // A template with no tool section: the server teaches Hermes itself.
  EXPECT_EQ(tool_format_for_template(read_template("google-gemma-2-2b-it.jinja")).name(), "hermes");
}

TEST(ToolFormats, TheTemplatesCallsReadBack) {
  const ToolSet set = tools();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.file);
    const ToolFormat& format = *tool_format_named(c.format);
    ordered calls = ordered::array();
    calls.push_back(call("abcdefghi", "get_weather", {{"city", "Paris"}, {"days", 3}}));
    if (c.parallel) calls.push_back(call("bcdefghij", "get_time", {{"tz", "CET"}}));
    const std::string text = after_open(render_calls(c.file, calls), format);
    const std::vector<ToolCall> read = format.parse(text, &set);
    ASSERT_EQ(read.size(), calls.size()) << text;
    EXPECT_EQ(read[0].name, "get_weather");
    EXPECT_EQ(json::parse(read[0].arguments), json::parse(R"({"city": "Paris", "days": 3})"));
    if (c.parallel) {
      EXPECT_EQ(read[1].name, "get_time");
      EXPECT_EQ(json::parse(read[1].arguments), json::parse(R"({"tz": "CET"})"));
    }
  }
}

// The constrained formats whose envelope is the template's own spelling: the envelope accepts
// the rendered calls byte for byte.
TEST(ToolFormats, EnvelopesAcceptTheTemplatesSpelling) {
  const ToolSet base = tools();
  for (const Case& c : kCases) {
    const ToolFormat& format = *tool_format_named(c.format);
    // Mistral's history adds [CALL_ID], Nemo's an "id", gpt-oss's puts the recipient first:
    // spellings the model is not asked to write.
    if (format.envelope() == nullptr || format.name() == "mistral" ||
        format.name() == "mistral_nemo" || format.name() == "harmony")
      continue;
    SCOPED_TRACE(c.file);
    ordered calls = ordered::array();
    calls.push_back(call("abcdefghi", "get_weather", {{"city", "Paris"}, {"days", 3}}));
    if (c.parallel) calls.push_back(call("bcdefghij", "get_time", {{"tz", "CET"}}));
    std::string text = after_open(render_calls(c.file, calls), format);
    if (format.open_in_call()) text = std::string(format.open()) + text;
    const auto set = base.in_format(format);
    ToolCallPrefix p(set.get());
    size_t taken = 0;
    while (taken < text.size() && p.feed(static_cast<uint8_t>(text[taken]))) ++taken;
    EXPECT_TRUE(p.complete()) << "stopped at byte " << taken << " of " << json(text).dump();
  }
}

TEST(ToolFormats, RandomWalksThroughEachEnvelopeEndInValidCalls) {
  const ToolSet base = tools();
  const std::string alphabet = "\n {}\":,_abcdeghilmnoprstuwyz0123456789-[]<>|";
  for (const ToolFormat* format : all_tool_formats()) {
    if (format->envelope() == nullptr) continue;
    SCOPED_TRACE(std::string(format->name()));
    for (bool parallel : {false, true}) {
      const auto set = ToolSet(base.tools(), parallel).in_format(*format);
      for (uint32_t seed = 0; seed < 40; ++seed) {
        std::mt19937 rng(seed);
        ToolCallPrefix p(set.get());
        std::string text;
        if (format->open_in_call()) {
          ASSERT_TRUE(p.feed_all(format->open()));
          text = format->open();
        }
        for (int step = 0; step < 200 && !p.complete(); ++step) {
          const std::string options = fuzz::next_bytes(p, alphabet);
          ASSERT_FALSE(options.empty()) << "dead end after " << text;
          const char c = options[rng() % options.size()];
          ASSERT_TRUE(p.feed(static_cast<uint8_t>(c)));
          text += c;
        }
        ASSERT_TRUE(fuzz::complete_call_greedily(p, text, text.size() + 4096)) << text;
        const std::string body = format->open_in_call() ? text.substr(format->open().size()) : text;
        const std::vector<ToolCall> calls = format->parse(body, set.get());
        ASSERT_FALSE(calls.empty()) << text;
        if (!set->several()) {
          EXPECT_EQ(calls.size(), 1u) << text;
        }
        for (const ToolCall& call : calls) {
          const auto it = std::find_if(base.tools().begin(), base.tools().end(),
                                       [&](const Tool& t) { return t.name == call.name; });
          ASSERT_NE(it, base.tools().end()) << text;
          EXPECT_TRUE(
              fuzz::schema_valid(json::parse(call.arguments), it->parameters, it->parameters))
              << text;
        }
      }
    }
  }
}

// For a template that writes calls but lists no tools (DeepSeek's), the server describes them in
// the system message with an example call in the format: the example reads back as a call.
TEST(ToolFormats, SystemBlockTeachesTheFormat) {
  const ToolSet base = tools();
  // Hermes' own block is the one its models were trained with (a schematic example).
  for (const ToolFormat* format : all_tool_formats()) {
    if (format->envelope() == nullptr || format == &hermes_tool_format()) continue;
    SCOPED_TRACE(std::string(format->name()));
    const std::string block = base.in_format(*format)->format_system_block();
    EXPECT_NE(block.find(R"("name": "get_weather")"), std::string::npos) << block;
    const size_t example = block.rfind(format->open());
    ASSERT_NE(example, std::string::npos) << block;
    const std::vector<ToolCall> calls =
        format->parse(block.substr(example + format->open().size()), nullptr);
    ASSERT_EQ(calls.size(), 1u) << block;
    EXPECT_EQ(calls[0].name, "function_name");
    EXPECT_EQ(calls[0].arguments, R"({"argument":"value"})");
  }
  const std::string deepseek =
      base.in_format(*tool_format_named("deepseek_v3_1"))->format_system_block();
  EXPECT_NE(
      deepseek.find("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function_name<｜tool▁sep｜>{"),
      std::string::npos)
      << deepseek;
}

TEST(ToolFormats, ReadWhatModelsWrite) {
  const ToolSet set = tools();
  const auto read = [&](const char* format, const std::string& text) {
    return tool_format_named(format)->parse(text, &set);
  };
  // gpt-oss names the recipient after the channel, and constrains the message to JSON.
  auto calls = read("harmony", R"(get_weather <|constrain|>json<|message|>{"city":"Paris"})");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city":"Paris"})");
  calls = read("mistral",
               R"(get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "UTC"})");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].name, "get_time");
  // Qwen3-Coder's values by their declared types: "3" an integer, "007" a string parameter.
  calls = read("qwen3_xml",
               "\n<function=get_weather>\n<parameter=city>\n007\n</parameter>\n<parameter=days>\n"
               "3\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(json::parse(calls[0].arguments), json::parse(R"({"city": "007", "days": 3})"));
  // A call cut off before its end is no call; the whole one before it is.
  calls = read("deepseek_v3_1",
               "<｜tool▁call▁begin｜>get<｜tool▁sep｜>{\"tz\": \"UTC\"}<｜tool▁call▁end｜>"
               "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"U");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get");
  calls = read("qwen3_xml", "\n<function=get_weather>\n<parameter=city>\nPar");
  EXPECT_TRUE(calls.empty());
  // Arguments given as the JSON text of an object, as some fine-tunes write them.
  calls = read("hermes", R"({"name": "get", "arguments": "{\"tz\": \"UTC\"}"})");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, R"({"tz":"UTC"})");
}

TEST(ToolFormats, HostileTextNeverThrows) {
  const ToolSet set = tools();
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {"<tool_call>",
                                           "<function=",
                                           "<parameter=",
                                           "</parameter>",
                                           "</function>",
                                           "[TOOL_CALLS]",
                                           "[ARGS]",
                                           "{",
                                           "}",
                                           "\"",
                                           "\\",
                                           "get_weather",
                                           "<｜tool▁call▁begin｜>",
                                           "<｜tool▁sep｜>",
                                           "<｜tool▁call▁end｜>",
                                           "<|message|>",
                                           ">",
                                           "\n",
                                           "[",
                                           "]",
                                           "{\"name\": \"",
                                           "\"arguments\": ",
                                           "x"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    for (const ToolFormat* format : all_tool_formats()) {
      std::vector<ToolCall> calls;
      ASSERT_NO_THROW(calls = format->parse(text, &set)) << format->name() << ": " << text;
      for (const ToolCall& c : calls) EXPECT_TRUE(json::parse(c.arguments).is_object()) << text;
    }
    // The fuzz harness on the same text: whatever prefix of it an envelope accepts completes to
    // calls that read back within their schemas (it aborts otherwise).
    const uint8_t pick = static_cast<uint8_t>(rng() % 16);
    std::string input(1, static_cast<char>(pick));
    input += text;
    fuzz::check_tool_calls(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
}

// Mistral's templates refuse call ids that are not 9 letters and digits, such as this server's
// own: the history's ids are made so, the same in a call and in its result.
TEST(ToolFormats, MistralGetsCallIdsItAccepts) {
  const ChatTemplate t = ChatTemplate::jinja(
      read_template("Mistral-Small-3.2-24B-Instruct-2506.jinja"), {"<s>", "</s>"});
  server::ApiRequest r;
  r.kind = server::ApiKind::Chat;
  ChatMessage assistant{"assistant", ""};
  assistant.tool_calls =
      ordered::array({call("call_0123456789abcdef01234567", "get", {{"tz", "UTC"}})});
  ChatMessage result{"tool", "12:00"};
  result.tool_call_id = "call_0123456789abcdef01234567";
  r.messages = {{"user", "Time?"}, assistant, result};
  EXPECT_THROW(t.apply(r.messages, ChatOptions{}), Error);  // as the client sent them
  const std::string prompt = server::chat_prompt_text(t, r);
  const size_t id = prompt.find("[CALL_ID]");
  ASSERT_NE(id, std::string::npos) << prompt;
  const std::string nine = prompt.substr(id + 9, 9);
  EXPECT_NE(prompt.find("[TOOL_RESULTS]" + nine), std::string::npos) << prompt;
}

}  // namespace
}  // namespace ts

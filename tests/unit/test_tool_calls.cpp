// Tool calls: ToolCallPrefix accepts the Hermes envelope around a declared name and that tool's
// arguments, refusing an undeclared name or out-of-schema arguments at their first byte; random
// walks through it end in calls that parse and whose arguments the independent validator accepts;
// the tools' system section, the call text and its parsing agree; stop strings report what
// stopped them and what followed (how the scheduler finds a call's marker).
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../../fuzz/json_schema_harness.h"
#include "constrain/tool_calls.h"
#include "core/error.h"
#include "text/stop_strings.h"

namespace ts {
namespace {

using nlohmann::json;

Tool tool(const std::string& name, const json& parameters) {
  return {name, "does " + name, parameters,
          std::make_shared<const JsonSchema>(JsonSchema::compile(parameters))};
}

const json kWeather = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false})");
const json kTime = json::parse(R"({"type": "object", "properties": {"tz": {"type": "string",
    "maxLength": 8}, "offset": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["tz"]})");

ToolSet weather_and_time() {
  return ToolSet({tool("get_weather", kWeather), tool("get_time", kTime),
                  tool("get_weather_history", kWeather)});
}

size_t accepted(const ToolSet& tools, const std::string& text) {
  ToolCallPrefix p(&tools);
  for (size_t i = 0; i < text.size(); ++i)
    if (!p.feed(static_cast<uint8_t>(text[i]))) return i;
  return text.size();
}

TEST(ToolCallPrefix, AcceptsACallAndRefusesEachViolationAtItsByte) {
  const ToolSet tools = weather_and_time();
  const std::string call = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
  const ToolSet one({tool("get_weather", kWeather)}, false);  // parallel_tool_calls false
  for (const std::string& lead : {std::string(), std::string("\n"), std::string("\n  ")}) {
    ToolCallPrefix single(&one);
    EXPECT_TRUE(single.feed_all(lead + call)) << lead;
    EXPECT_TRUE(single.complete() && single.closed());
    EXPECT_FALSE(single.accepts("\n")) << "nothing follows the one call";
    // Parallel: a call is whole once closed; the answer may end there or go on with another.
    ToolCallPrefix p(&tools);
    EXPECT_TRUE(p.feed_all(lead + call)) << lead;
    EXPECT_FALSE(p.complete());
    EXPECT_FALSE(p.accepts("}"));
    EXPECT_TRUE(p.feed_all("\n</tool_call>"));
    EXPECT_TRUE(p.complete());
    EXPECT_FALSE(p.closed());
    EXPECT_TRUE(p.feed_all("\n<tool_call>\n"));
    EXPECT_FALSE(p.complete());
    EXPECT_TRUE(p.feed_all(R"({"name": "get_time", "arguments": {"tz": "CET"}})"
                           "\n</tool_call>"));
    EXPECT_TRUE(p.complete());
  }
  const std::vector<ToolCall> calls =
      parse_tool_calls("\n" + call + "\n</tool_call>\n<tool_call>\n" + call + "\n</tool_call>");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].name, "get_weather");
  EXPECT_EQ(calls[1].arguments, R"({"city":"Paris"})");
  // A string may hold the closing marker; a call cut short is not one.
  const std::vector<ToolCall> tricky =
      parse_tool_calls(R"({"name": "get_weather", "arguments": {"city": "a}</tool_call>\"{"}})"
                       "\n</tool_call>\n<tool_call>\n"
                       R"({"name": "get_time", "arguments": {"tz)");
  ASSERT_EQ(tricky.size(), 1u);
  EXPECT_EQ(json::parse(tricky[0].arguments)["city"], "a}</tool_call>\"{");
  const std::vector<std::pair<std::string, size_t>> refused = {
      {R"({"name": "get_wind)", 15},                                          // no such tool
      {R"({"name": "get_weather_x)", 22},                                     // nor this one
      {R"({"name": "get_weather", "arguments": {"town)", 39},                 // not a parameter
      {R"({"name": "get_time", "arguments": {"tz": "123456789)", 50},         // maxLength 8
      {R"({"name": "get_time", "arguments": {"tz": "x", "offset": 15)", 57},  // maximum 14
      {R"({"name": "get_time", "arguments": {})", 35},                        // tz is required
      {R"({"name":"get_time")", 8},  // the envelope is exact
      {"\n\n{", 1},                  // one line break
  };
  for (const auto& [text, at] : refused) EXPECT_EQ(accepted(tools, text), at) << text;
  const std::string history = R"({"name": "get_weather_history", "arguments": {"city": "x"}})";
  EXPECT_EQ(accepted(tools, history), history.size());
}

// Random accepted bytes, then a greedy completion (fuzz/json_schema_harness.h's order): the call
// parses, names a declared tool, and its arguments satisfy that tool's schema.
TEST(ToolCallPrefix, RandomWalksEndInValidCalls) {
  const ToolSet tools = weather_and_time();
  const std::string alphabet = "\n {}\":,_abcdeghilmnoprstuwyz0123456789-";
  for (uint32_t seed = 0; seed < 80; ++seed) {
    std::mt19937 rng(seed);
    ToolCallPrefix p(&tools);
    std::string text;
    for (int step = 0; step < 120 && !p.complete(); ++step) {
      const std::string options = fuzz::next_bytes(p, alphabet);
      ASSERT_FALSE(options.empty()) << "dead end after " << text;
      const char c = options[rng() % options.size()];
      ASSERT_TRUE(p.feed(static_cast<uint8_t>(c)));
      text += c;
    }
    while (!p.complete())
      ASSERT_TRUE(fuzz::feed_first_taken(p, fuzz::schema_completion_order(), text)) << text;
    const std::vector<ToolCall> calls = parse_tool_calls(text);
    ASSERT_FALSE(calls.empty()) << text;
    const ToolCall& call = calls.back();
    const auto it = std::find_if(tools.tools().begin(), tools.tools().end(),
                                 [&](const Tool& t) { return t.name == call.name; });
    ASSERT_NE(it, tools.tools().end()) << text;
    EXPECT_TRUE(fuzz::schema_valid(json::parse(call.arguments), it->parameters, it->parameters))
        << text;
  }
}

TEST(ToolSet, ListsTheToolsAndReadsCallsBack) {
  const ToolSet tools = weather_and_time();
  const std::string block = tools.system_block();
  EXPECT_EQ(block.rfind("# Tools\n\n", 0), 0u);
  EXPECT_NE(block.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", "
                       "\"description\": \"does get_time\", \"parameters\": {"),
            std::string::npos)
      << block;
  EXPECT_NE(block.find("<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                       "<args-json-object>}\n</tool_call>"),
            std::string::npos);
  const std::string text = tool_call_text("get_time", R"({"tz":"UTC"})");
  EXPECT_EQ(text,
            "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>");
  // What follows the marker is what the recognizer reads, and what parse_tool_calls reads back.
  ToolCallPrefix p(&tools);
  const std::string body = text.substr(kToolCallOpen.size());
  EXPECT_TRUE(p.feed_all(body) && p.complete()) << body;
  const std::vector<ToolCall> calls = parse_tool_calls(body);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_time");
  EXPECT_EQ(json::parse(calls[0].arguments), json::parse(R"({"tz": "UTC"})"));
  EXPECT_THROW(parse_tool_call("not a call"), Error);
  EXPECT_THROW(ToolSet({tool("a", kTime), tool("a", kWeather)}), Error);
  EXPECT_EQ(tools.only("get_time")->tools().size(), 1u);
  EXPECT_THROW(tools.only("get_date"), Error);
}

TEST(StopStrings, ReportWhatStoppedThemAndWhatFollowed) {
  StopStrings s({"END", std::string(kToolCallOpen)});
  EXPECT_EQ(s.push("Let me check. <tool_"), "Let me check. ");
  EXPECT_EQ(s.push("call>\n{\"na"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), kToolCallOpen);
  EXPECT_EQ(s.after(), "\n{\"na");
}

}  // namespace
}  // namespace ts

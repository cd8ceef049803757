// The other dialects' request readers (Ollama's /api/chat and /api/generate, OpenAI's Responses)
// and the Responses store, without a model or a socket: what each field becomes in the shared
// ApiRequest, Ollama's defaults, the errors naming the dialect's own fields, and the store's
// bounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/ollama_request.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace ts::server {
namespace {

using nlohmann::json;

std::string ollama_error(const std::string& body) {
  try {
    parse_ollama_chat(json::parse(body));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << body;
    return e.what();
  }
  return "";
}

std::string responses_error(const std::string& body) {
  try {
    parse_responses_request(json::parse(body), json::array());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << body;
    return e.what();
  }
  return "";
}

TEST(OllamaRequest, MapsOptionsOverOllamasDefaults) {
  const OllamaRequest d =
      parse_ollama_chat(json::parse(R"({"model": "m:latest", "messages": [{"role": "user",
        "content": "hi"}]})"));
  EXPECT_EQ(d.api.model, "m");
  EXPECT_TRUE(d.stream);
  EXPECT_FLOAT_EQ(d.api.sampling.temperature, 0.8f);
  EXPECT_EQ(d.api.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(d.api.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(d.api.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(d.api.sampling.penalty_last_n, 64);
  EXPECT_EQ(d.api.max_tokens, -1);
  const OllamaRequest o = parse_ollama_chat(json::parse(R"({"model": "m", "stream": false,
    "messages": [{"role": "user", "content": "hi"}], "format": "json", "think": false,
    "options": {"num_predict": 7, "temperature": 0, "top_k": 3, "seed": 11, "stop": ["x"],
                "num_ctx": 99999, "num_gpu": 1, "mirostat": 0}})"));
  EXPECT_FALSE(o.stream);
  EXPECT_EQ(o.api.max_tokens, 7);
  EXPECT_FLOAT_EQ(o.api.sampling.temperature, 0.0f);
  EXPECT_EQ(o.api.sampling.top_k, 3);
  EXPECT_EQ(o.api.seed, 11u);
  EXPECT_EQ(o.api.stop, std::vector<std::string>{"x"});
  EXPECT_NE(o.api.json, nullptr);
  EXPECT_EQ(o.api.chat_options.kwargs["enable_thinking"], false);
  // -1 (and -2) mean no limit; a negative seed draws one.
  const OllamaRequest u = parse_ollama_chat(json::parse(R"({"model": "m",
    "messages": [{"role": "user", "content": "hi"}], "options": {"num_predict": -2, "seed": -1}})"));
  EXPECT_EQ(u.api.max_tokens, -1);
  EXPECT_FALSE(u.api.seed.has_value());
}

TEST(OllamaRequest, ToolTurnsBecomeOpenAIMessages) {
  const OllamaRequest r = parse_ollama_chat(json::parse(R"({"model": "m", "messages": [
    {"role": "user", "content": "time?"},
    {"role": "assistant", "content": "", "thinking": "hm",
     "tool_calls": [{"function": {"name": "now", "arguments": {"tz": "UTC"}}}]},
    {"role": "tool", "content": "12:00", "tool_name": "now"}],
    "tools": [{"type": "function", "function": {"name": "now", "parameters": {"type": "object",
      "properties": {"tz": {"type": "string"}}}}}]})"));
  ASSERT_EQ(r.api.messages.size(), 3u);
  EXPECT_EQ(r.api.messages[1].reasoning_content, "hm");
  ASSERT_EQ(r.api.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.api.messages[1].tool_calls[0]["function"]["arguments"]["tz"], "UTC");
  EXPECT_EQ(r.api.messages[2].name, "now");
  EXPECT_NE(r.api.tools, nullptr);
}

TEST(OllamaRequest, GenerateIsChatUnlessRaw) {
  const json body = json::parse(R"({"model": "m", "prompt": "Once", "system": "Be brief"})");
  const OllamaRequest chat = parse_ollama_generate(body, true);
  EXPECT_EQ(chat.api.kind, ApiKind::Chat);
  ASSERT_EQ(chat.api.messages.size(), 2u);
  EXPECT_EQ(chat.api.messages[0].role, "system");
  const OllamaRequest raw =
      parse_ollama_generate(json::parse(R"({"model": "m", "prompt": "Once", "raw": true})"), true);
  EXPECT_EQ(raw.api.kind, ApiKind::Completion);
  EXPECT_EQ(raw.api.prompt_text, "Once");
  EXPECT_EQ(raw.api.max_tokens, -1);  // Ollama's default, not the completions API's 16
  EXPECT_EQ(parse_ollama_generate(body, false).api.kind, ApiKind::Completion);
  EXPECT_TRUE(parse_ollama_generate(json::parse(R"({"model": "m"})"), true).load_only);
}

TEST(OllamaRequest, ErrorsNameOllamasFields) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"messages": []})", "'model' is required"},
      {R"({"model": "m"})", "'messages' is required"},
      {R"({"model": "m", )" + msgs + R"(, "options": {"temperature": 9}})",
       "'options.temperature' must be between"},
      {R"({"model": "m", )" + msgs + R"(, "options": {"num_predict": 1.5}})",
       "'options.num_predict' must be an integer"},
      {R"({"model": "m", )" + msgs + R"(, "options": {"typical_p": 0.5}})", "'options.typical_p'"},
      {R"({"model": "m", )" + msgs + R"(, "options": {"flux": 1}})", "'options.flux'"},
      {R"({"model": "m", )" + msgs + R"(, "format": {"type": "tuple"}})", "'format'"},
      {R"({"model": "m", )" + msgs + R"(, "think": "lots"})", "'think'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})",
       "'messages[0].images'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x", "mood": 1}]})",
       "'messages[0].mood'"},
  };
  for (const auto& [body, want] : cases)
    EXPECT_NE(ollama_error(body).find(want), std::string::npos)
        << body << " -> " << ollama_error(body);
}

TEST(ResponsesRequest, InputItemsBecomeAConversation) {
  const ResponsesRequest r =
      parse_responses_request(json::parse(R"({"model": "m",
    "instructions": "Be brief.",
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
      {"type": "reasoning", "summary": []},
      {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{\"city\": \"Oslo\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
    "tools": [{"type": "function", "name": "w", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "w"}, "max_output_tokens": 50,
    "reasoning": {"effort": "minimal", "summary": "auto"}, "store": false})"),
                              json::array({{{"role", "user"}, {"content", "before"}}}));
  // The instructions, the stored conversation, then the new items (both calls in one message).
  ASSERT_EQ(r.api.messages.size(), 5u);
  EXPECT_EQ(r.api.messages[0].role, "system");
  EXPECT_EQ(r.api.messages[1].content, "before");
  EXPECT_EQ(r.api.messages[3].tool_calls.size(), 2u);
  EXPECT_EQ(r.api.messages[4].role, "tool");
  EXPECT_EQ(r.api.messages[4].tool_call_id, "c1");
  EXPECT_EQ(r.new_messages.size(), 3u);  // not the instructions, not the stored turns
  EXPECT_TRUE(r.api.tool_required);
  EXPECT_EQ(r.api.max_tokens, 50);
  EXPECT_EQ(r.api.chat_options.kwargs["reasoning_effort"], "low");
  EXPECT_TRUE(r.summary);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  const ResponsesRequest f = parse_responses_request(
      json::parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p",
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})"),
      json::array());
  EXPECT_NE(f.api.json, nullptr);
}

TEST(ResponsesRequest, ErrorsNameResponsesFields) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "'input' is required"},
      {R"({"input": "x", "max_output_tokens": -1})", "'max_output_tokens'"},
      {R"({"input": "x", "tools": [{"type": "file_search"}]})", "'tools[0].type'"},
      {R"({"input": "x", "tools": [{"type": "function", "name": 5}]})", "'tools[0].name'"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": 1}}})",
       "'text.format'"},
      {R"({"input": "x", "reasoning": {"summary": "long"}})", "'reasoning.summary'"},
      {R"({"input": [{"type": "function_call", "name": "f"}]})", "'input[0].call_id'"},
      {R"({"input": [{"role": "user"}]})", "'input[0].content'"},
      {R"({"input": "x", "conversation": "c"})", "'conversation'"},
  };
  for (const auto& [body, want] : cases)
    EXPECT_NE(responses_error(body).find(want), std::string::npos)
        << body << " -> " << responses_error(body);
}

TEST(ResponseStore, KeepsTheNewestWithinItsBounds) {
  ResponseStore by_count(2, 1 << 20);
  for (const char* id : {"a", "b", "c"}) by_count.put(id, json::array(), json::object());
  EXPECT_FALSE(by_count.get("a").has_value());
  EXPECT_TRUE(by_count.get("b").has_value());
  EXPECT_TRUE(by_count.get("c").has_value());
  EXPECT_TRUE(by_count.erase("b"));
  EXPECT_FALSE(by_count.erase("b"));
  EXPECT_EQ(by_count.size(), 1u);

  ResponseStore by_bytes(100, 300);
  const json big = json::array({std::string(120, 'x')});
  for (const char* id : {"a", "b", "c"}) by_bytes.put(id, big, json::object());
  EXPECT_FALSE(by_bytes.get("a").has_value());
  EXPECT_TRUE(by_bytes.get("c").has_value());
  by_bytes.put("huge", json::array({std::string(400, 'x')}), json::object());
  EXPECT_FALSE(by_bytes.get("huge").has_value());  // larger than the whole store: not kept
  EXPECT_TRUE(by_bytes.get("c").has_value());
}

}  // namespace
}  // namespace ts::server

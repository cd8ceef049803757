// OpenAI request parsing and response shapes of the server, without a model or a socket: every
// field's default, range and type check, the refusal of features we do not implement, and the
// JSON the official clients expect (whole answers, stream chunks, usage, logprobs, errors); and
// llama.cpp's /tokenize and /detokenize bodies over the bundled model's tokenizer.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/chat_prompt.h"
#include "server/logprobs.h"
#include "server/tokenize_api.h"
#include "server/tool_request.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace ts::server {
namespace {

using nlohmann::json;

ApiRequest completion(const std::string& body) {
  return parse_api_request(ApiKind::Completion, json::parse(body));
}
ApiRequest chat(const std::string& body) {
  return parse_api_request(ApiKind::Chat, json::parse(body));
}

// The Input error's message, or "" when the body parses.
std::string error_of(ApiKind kind, const std::string& body) {
  try {
    parse_api_request(kind, json::parse(body));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << body;
    return e.what();
  }
  return "";
}

TEST(ServerApi, CompletionDefaultsAreOpenAIs) {
  const ApiRequest r = completion(R"({"prompt": "Hi"})");
  EXPECT_EQ(r.prompt_text, "Hi");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_FALSE(r.stream);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(r.top_logprobs, -1);
  EXPECT_TRUE(r.cache_prompt);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "Hi"}]})").max_tokens, -1);
}

TEST(ServerApi, ReadsEveryField) {
  const ApiRequest r =
      completion(R"({"model": "m", "prompt": ["Hello"], "max_tokens": 7, "temperature": 0.5,
    "top_p": 0.9, "stop": ["a", "bc"], "seed": 42, "presence_penalty": -1.5, "frequency_penalty": 2,
    "stream": true, "stream_options": {"include_usage": true}, "logprobs": 3, "top_k": 20, "min_p": 0.1,
    "repeat_penalty": 1.1, "ignore_eos": true, "logit_bias": {"50256": -100, "7": 2.5},
    "cache_prompt": false, "user": "ignored"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.seed, 42u);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -1.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 2.0f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.cache_prompt);
  EXPECT_EQ(r.sampling.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{50256, -100.0f}, {7, 2.5f}}));
  EXPECT_TRUE(completion(R"({"prompt": "x", "logit_bias": {}})").sampling.logit_bias.empty());
  EXPECT_EQ(r.json, nullptr);
  EXPECT_EQ(completion(R"({"prompt": "x", "response_format": {"type": "json_object"}})").json,
            JsonSchema::any_object());
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}],
    "response_format": {"type": "json_object"}})")
                .json,
            JsonSchema::any_object());
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}],
    "response_format": {"type": "text"}})")
                .json,
            nullptr);
  const auto schema = chat(R"({"messages": [{"role": "user", "content": "x"}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})")
                          .json;
  ASSERT_NE(schema, nullptr);
  EXPECT_NE(schema, JsonSchema::any_object());
  EXPECT_EQ(completion(R"({"prompt": "x", "stop": "end"})").stop, std::vector<std::string>{"end"});
  EXPECT_EQ(completion(R"({"prompt": [5, 6, 7]})").prompt_tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(completion(R"({"prompt": [[8, 9]]})").prompt_tokens, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(completion(R"({"prompt": "x", "seed": -1})").seed, ~uint64_t{0});
  // A list of prompts: each answered in turn (issue 37).
  const ApiRequest list = completion(R"({"prompt": ["a", [4, 5], "c"], "n": 2})");
  ASSERT_EQ(list.prompt_list.size(), 3u);
  EXPECT_EQ(list.prompt_list[0].text, "a");
  EXPECT_EQ(list.prompt_list[1].tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(list.prompt_list[2].text, "c");
  EXPECT_TRUE(completion(R"({"prompt": ["one"]})").prompt_list.empty());
}

TEST(ServerApi, ReadsChatMessages) {
  const ApiRequest r = chat(R"({"messages": [{"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
    {"role": "assistant", "content": null}], "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 2})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hello");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(
      chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})").top_logprobs,
      0);
  // The template's variables, and an assistant turn's thinking.
  const ApiRequest t = chat(R"({"messages": [{"role": "user", "content": "x"},
    {"role": "assistant", "content": "y", "reasoning_content": "because"}],
    "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "high"})");
  EXPECT_EQ(t.chat_options.kwargs.dump(), R"({"enable_thinking":false,"reasoning_effort":"high"})");
  EXPECT_EQ(t.messages[1].reasoning_content,
            "because");  // llama.cpp's top-level json_schema is a response_format.
  EXPECT_NE(chat(R"({"messages": [{"role": "user", "content": "x"}],
    "json_schema": {"type": "object", "properties": {"a": {"type": "string"}}}})")
                .json,
            nullptr);
}

TEST(ServerApi, RefusesWhatIsMalformedOrUnsupported) {
  const std::vector<std::pair<std::string, std::string>> bad_completions = {
      {R"({})", "'prompt' is required"},
      {R"({"prompt": 3})", "'prompt'"},
      {R"({"prompt": []})", "'prompt'"},
      {R"({"prompt": ["a", "b", "c", "d", "e", "f"], "n": 3})", "more than 16 answers"},
      {R"({"prompt": ["a", 5]})", "'prompt'"},
      {R"({"prompt": [1, -2]})", "non-negative"},
      {R"({"prompt": "x", "max_tokens": 0})", "'max_tokens'"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "'max_tokens' must be an integer"},
      {R"({"prompt": "x", "max_tokens": 99999999999})", "'max_tokens'"},
      {R"({"prompt": "x", "temperature": 2.5})", "'temperature' must be between"},
      {R"({"prompt": "x", "temperature": "hot"})", "'temperature' must be a number"},
      {R"({"prompt": "x", "top_p": 0})", "'top_p'"},
      {R"({"prompt": "x", "presence_penalty": 3})", "'presence_penalty'"},
      {R"({"prompt": "x", "stop": ""})", "'stop'"},
      {R"({"prompt": "x", "stop": [1]})", "'stop'"},
      {R"({"prompt": "x", "stream": "yes"})", "'stream'"},
      {R"({"prompt": "x", "seed": "abc"})", "'seed'"},
      {R"({"prompt": "x", "n": 0})", "'n' must be between 1 and 16"},
      {R"({"prompt": "x", "n": 17})", "'n' must be between 1 and 16"},
      {R"({"prompt": "x", "best_of": 3})", "'best_of'"},
      {R"({"prompt": "x", "echo": true})", "'echo'"},
      {R"({"prompt": "x", "suffix": "end"})", "'suffix'"},
      {R"({"prompt": "x", "logprobs": 6})", "'logprobs'"},
      {R"({"prompt": "x", "logit_bias": [5, 10]})", "'logit_bias' must be an object"},
      {R"({"prompt": "x", "logit_bias": {"a5": 10}})", "'logit_bias' keys must be token ids"},
      {R"({"prompt": "x", "logit_bias": {"-5": 10}})", "'logit_bias' keys must be token ids"},
      {R"({"prompt": "x", "logit_bias": {"99999999999": 1}})", "'logit_bias' keys"},
      {R"({"prompt": "x", "logit_bias": {"5": "up"}})", "'logit_bias' values must be numbers"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", "'logit_bias' values must be between"},
      {R"({"prompt": "x", "model": 5})", "'model'"},
  };
  for (const auto& [body, message] : bad_completions)
    EXPECT_NE(error_of(ApiKind::Completion, body).find(message), std::string::npos)
        << body << " -> " << error_of(ApiKind::Completion, body);
  const std::vector<std::pair<std::string, std::string>> bad_chats = {
      {R"({})", "'messages' is required"},
      {R"({"messages": []})", "'messages'"},
      {R"({"messages": ["hi"]})", "'messages[0]'"},
      {R"({"messages": [{"content": "hi"}]})", "'messages[0].role'"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "'messages[0].content'"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "'messages[0].content'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "'tools[0]' must be"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}}}}}})",
       "'response_format' json_schema at #/properties/a: the keyword pattern is not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})",
       "'response_format' json_schema needs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})",
       "'response_format' must be"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": "json"})",
       "'response_format' must be"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "'top_logprobs'"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})",
       "'messages[0].role' must be system, developer, user, assistant or tool, got 'bot'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})",
       "'chat_template_kwargs' must be an object"},
      {R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})",
       "'reasoning_effort' must be low, medium or high"},
      {R"({"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= x"})",
       "'grammar' is not a field this server implements"},
      {R"({"messages": [{"role": "user", "content": "x"}], "mirostat": 2})",
       "'mirostat' is not a field this server implements"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temprature": 0})",
       "'temprature' is not a field this server implements"},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt": "x"})",
       "'prompt' is not a field this server implements"},
      {R"({"messages": [{"role": "user", "content": "x"}], "json_schema": {"type": "object"},
          "response_format": {"type": "json_object"}})",
       "'json_schema' cannot be combined with response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
       "'top_logprobs'"},
  };
  for (const auto& [body, message] : bad_chats)
    EXPECT_NE(error_of(ApiKind::Chat, body).find(message), std::string::npos)
        << body << " -> " << error_of(ApiKind::Chat, body);
}

TEST(ServerApi, ResponsesHaveOpenAIShapes) {
  ResponseMeta m{ApiKind::Chat, new_response_id(ApiKind::Chat), "tiny", 1700000000, true};
  EXPECT_EQ(m.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(m.id.size(), 9u + 24u);
  EXPECT_NE(m.id, new_response_id(ApiKind::Chat));
  const json whole = full_response(m,
                                   {Choice{"Hi!", FinishReason::Stop, nullptr, {}},
                                    Choice{"Hey", FinishReason::Length, nullptr, {}}},
                                   {5, 2, 3});
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "Hi!"}}));
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["choices"][1]["index"], 1);
  EXPECT_EQ(whole["choices"][1]["message"]["content"], "Hey");
  EXPECT_EQ(whole["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"], (json{{"prompt_tokens", 5},
                                  {"completion_tokens", 2},
                                  {"total_tokens", 7},
                                  {"prompt_tokens_details", {{"cached_tokens", 3}}}}));
  EXPECT_EQ(role_chunk(m, 0)["choices"][0]["delta"],
            (json{{"role", "assistant"}, {"content", ""}}));
  const json text = text_chunk(m, 0, "Hi", nullptr);
  EXPECT_EQ(text["object"], "chat.completion.chunk");
  EXPECT_TRUE(text["usage"].is_null());
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "Hi");
  EXPECT_EQ(text_chunk(m, 3, "Hi", nullptr)["choices"][0]["index"], 3);
  EXPECT_EQ(finish_chunk(m, 1, FinishReason::Length, nullptr)["choices"][0]["finish_reason"],
            "length");
  const json usage = usage_chunk(m, {5, 2});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);

  ResponseMeta c{ApiKind::Completion, new_response_id(ApiKind::Completion), "tiny", 1, false};
  EXPECT_EQ(c.id.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(full_response(c, {Choice{"abc", FinishReason::Length, nullptr, {}}},
                          {1, 3})["choices"][0]["text"],
            "abc");
  const json chunk = text_chunk(c, 0, "a", nullptr);
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "a");
  EXPECT_FALSE(chunk.contains("usage"));

  EXPECT_EQ(error_json("bad", "invalid_request_error", "")["error"],
            (json{{"message", "bad"},
                  {"type", "invalid_request_error"},
                  {"param", nullptr},
                  {"code", nullptr}}));
  EXPECT_EQ(error_json("no", "server_error", "queue_full")["error"]["code"], "queue_full");
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(dump(json("\xff")), "\"\xef\xbf\xbd\"");  // invalid UTF-8 is replaced, not thrown
}

TEST(ServerApi, LogprobsAreNormalisedAndOrdered) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const TokenLogprobs lp = token_logprobs(logits, 2, 3);
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(lp.chosen.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].id, 1);  // tie with 3: the lower id first
  EXPECT_EQ(lp.top[1].id, 3);
  EXPECT_EQ(lp.top[2].id, 2);
  EXPECT_FLOAT_EQ(lp.top[2].logprob, lp.chosen.logprob);
  EXPECT_TRUE(token_logprobs(logits, 0, 0).top.empty());
  EXPECT_EQ(token_logprobs(logits, 0, 10).top.size(), 4u);
}

TEST(ServerApi, TokenizeAndDetokenizeAsLlamaCpp) {
  const Tokenizer tok =
      Tokenizer::from_gguf(*GgufFile::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf"));
  const std::string text = "Once upon a time, \xE2\x82\xAC 42";
  const std::vector<int32_t> ids = tok.encode(text, false, true);
  EXPECT_EQ(tokenize_response(tok, json{{"content", text}}), (json{{"tokens", ids}}));
  const json with_bos = tokenize_response(tok, json{{"content", text}, {"add_special", true}});
  EXPECT_EQ(with_bos["tokens"].size(), ids.size() + (tok.add_bos() ? 1 : 0));
  // Pieces: text, or the byte values of one that is not whole UTF-8; together, the tokens' bytes.
  const json pieces = tokenize_response(tok, json{{"content", text}, {"with_pieces", true}});
  ASSERT_EQ(pieces["tokens"].size(), ids.size());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    const json& t = pieces["tokens"][i];
    EXPECT_EQ(t["id"], ids[i]);
    if (t["piece"].is_string()) {
      joined += t["piece"].get<std::string>();
    } else {
      for (const json& b : t["piece"]) joined += static_cast<char>(b.get<int>());
    }
  }
  std::string want;
  for (int32_t id : ids) want += tok.token_to_piece(id, true);
  EXPECT_EQ(joined, want);
  EXPECT_EQ(detokenize_response(tok, json{{"tokens", ids}}),
            (json{{"content", tok.decode(ids, true)}}));
  EXPECT_EQ(detokenize_response(tok, json{{"tokens", json::array()}})["content"], "");
  const auto error_of = [&](auto fn, const json& body) -> std::string {
    try {
      fn(tok, body);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of(tokenize_response, json::object()), "'content' must be a string");
  EXPECT_EQ(error_of(tokenize_response, json{{"content", "x"}, {"add_special", 1}}),
            "'add_special' must be true or false");
  EXPECT_EQ(error_of(detokenize_response, json{{"tokens", "1 2"}}),
            "'tokens' must be a list of token ids");
  EXPECT_NE(error_of(detokenize_response, json{{"tokens", {1, tok.vocab_size()}}})
                .find("below the vocabulary size"),
            std::string::npos);
  EXPECT_NE(error_of(detokenize_response, json{{"tokens", {-1}}}).find("got -1"),
            std::string::npos);
}

// Tools: definitions compiled, tool_choice read, the tool turns of the history kept as sent (for
// templates that write them) and written in the Hermes format for those that do not (with the
// tools listed in the system message), and every malformed piece refused by name.
TEST(ServerApi, ReadsToolsAndToolTurns) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Weather now", "parameters": {"type": "object", "properties": {"city":
      {"type": "string"}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "noop"}}])";
  const ApiRequest a = chat(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "c2", "content": "cloudy"}], )" +
                            tools + "}");
  ASSERT_NE(a.tools, nullptr);
  EXPECT_EQ(a.tools->tools().size(), 2u);
  EXPECT_FALSE(a.tool_required);
  ASSERT_EQ(a.messages.size(), 5u);
  EXPECT_EQ(a.messages[2].tool_calls.dump(),
            R"([{"id":"c1","type":"function","function":{"name":"get_weather","arguments":)"
            R"({"city":"Paris"}}}])");
  EXPECT_EQ(a.messages[3].role, "tool");
  EXPECT_EQ(a.messages[3].tool_call_id, "c1");
  const std::vector<ts::ChatMessage> h = ts::server::hermes_messages(a.messages, a.tools.get());
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].content.rfind("Be brief.\n\n# Tools\n\n", 0), 0u) << h[0].content;
  EXPECT_NE(h[0].content.find("\"name\": \"get_weather\""), std::string::npos);
  EXPECT_EQ(h[2].content,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n"
            "</tool_call>");
  EXPECT_EQ(h[3].role, "user");
  EXPECT_EQ(h[3].content,
            "<tool_response>\n18 C\n</tool_response>\n<tool_response>\ncloudy\n</tool_response>");
  const std::string user = R"({"messages": [{"role": "user", "content": "x"}], )";
  const ApiRequest required = chat(user + tools + R"(, "tool_choice": "required"})");
  EXPECT_TRUE(required.tool_required);
  // A system message is added to hold the tools.
  EXPECT_EQ(ts::server::hermes_messages(required.messages, required.tools.get()).front().role,
            "system");
  const ApiRequest named = chat(
      user + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "noop"}}})");
  EXPECT_TRUE(named.tool_required);
  ASSERT_EQ(named.tools->tools().size(), 1u);
  EXPECT_EQ(named.tools->tools()[0].name, "noop");
  EXPECT_EQ(chat(user + tools + R"(, "tool_choice": "none"})").tools, nullptr);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {user + R"("tools": [{"type": "function", "function": {"name": "a b"}}]})",
       "'tools[0].function.name' must be 1 to 64"},
      {user + R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
          {"type": "object", "properties": {"a": {"pattern": "x"}}}}}]})",
       "'tools[0].function.parameters' json_schema at #/properties/a"},
      {user + R"("tools": [{"type": "function", "function": {"name": "f"}},
          {"type": "function", "function": {"name": "f"}}]})",
       "two tools are named 'f'"},
      {user + R"("tool_choice": "required"})", "'tool_choice' needs \"tools\""},
      {user + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "zz"}}})",
       "no tool is named 'zz'"},
      {user + tools + R"(, "tool_choice": "sometimes"})", "'tool_choice' must be"},
      {user + tools + R"(, "response_format": {"type": "json_object"}})",
       "cannot be combined with tools"},
      {user + R"("functions": [{"name": "f"}]})", "'functions' (the deprecated form of tools)"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "tool_calls' belong to assistant messages"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
          "arguments": "not json"}}]}]})",
       "arguments' must be a JSON object"},
  };
  for (const auto& [body, want] : refused) {
    const std::string got = error_of(ApiKind::Chat, body);
    EXPECT_NE(got.find(want), std::string::npos) << body << "\ngot: " << got;
  }
}

}  // namespace
// The prompt: a template that writes tools (Qwen 2.5's) gets them and the tool turns as sent; a
// format without tools gets the Hermes form; a final assistant message is continued.
TEST(ServerApi, ChatPromptFromTheTemplate) {
  std::ifstream f(ts::test::fixtures_dir() + "/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  const std::string source((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const ts::ChatTemplate qwen = ts::ChatTemplate::jinja(source, {});
  ASSERT_TRUE(qwen.renders_tools());
  const ApiRequest a = chat(R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18 C"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}}}}]})");
  const std::string prompt = ts::server::chat_prompt_text(qwen, a);
  EXPECT_NE(
      prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""),
      std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                        "\"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>"),
            std::string::npos)
      << prompt;
  const std::string chatml = ts::server::chat_prompt_text(ts::ChatTemplate::by_name("chatml"), a);
  EXPECT_NE(chatml.find("# Tools"), std::string::npos) << chatml;
  // Prefill: the answer continues the final assistant message.
  const ApiRequest p = chat(R"({"messages": [{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "The answer is"}]})");
  const std::string continued = ts::server::chat_prompt_text(qwen, p);
  EXPECT_EQ(continued.substr(continued.size() - 35), "<|im_start|>assistant\nThe answer is")
      << continued;
}

}  // namespace ts::server

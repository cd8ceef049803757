#include "server/api_response.h"

#include <cstdio>
#include <random>

namespace ts::server {
namespace {

using nlohmann::json;

bool chat(const ResponseMeta& m) {
  return m.kind == ApiKind::Chat;
}

json chunk(const ResponseMeta& m, json choices) {
  json j = {{"id", m.id},
            {"object", chat(m) ? "chat.completion.chunk" : "text_completion"},
            {"created", m.created},
            {"model", m.model},
            {"choices", std::move(choices)}};
  if (m.include_usage) j["usage"] = nullptr;
  return j;
}

// The one choice of a streamed chunk: a chat delta, or a completion's text.
json choice(const ResponseMeta& m, int index, json delta, const std::string& text, json finish,
            const json& logprobs) {
  json c = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", std::move(finish)}};
  if (chat(m)) {
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  return c;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}

// A chat token entry: {"token", "logprob", "bytes"} (the bytes tell a partial UTF-8 piece apart).
json chat_token(const Tokenizer& tok, const TokenProb& p) {
  const std::string piece = tok.token_to_piece(p.id, true);
  return {{"token", piece}, {"logprob", p.logprob}, {"bytes", bytes_of(piece)}};
}

}  // namespace

namespace {

std::string random_hex24() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[25];
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return hex;
}

// OpenAI's tool_calls list; in a stream each call carries its index.
json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", "call_" + random_hex24()},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streamed) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::string new_response_id(ApiKind kind) {
  return std::string(kind == ApiKind::Chat ? "chatcmpl-" : "cmpl-") + random_hex24();
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json logprobs_json(const ResponseMeta& m, const Tokenizer& tok,
                   const std::vector<TokenLogprobs>& lps, size_t& text_offset) {
  if (chat(m)) {
    json content = json::array();
    for (const TokenLogprobs& lp : lps) {
      json entry = chat_token(tok, lp.chosen);
      json top = json::array();
      for (const TokenProb& t : lp.top) top.push_back(chat_token(tok, t));
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array();
  json offsets = json::array();
  for (const TokenLogprobs& lp : lps) {
    const std::string piece = tok.token_to_piece(lp.chosen.id, true);
    tokens.push_back(piece);
    token_logprobs.push_back(lp.chosen.logprob);
    json top = json::object();
    for (const TokenProb& t : lp.top) top[tok.token_to_piece(t.id, true)] = t.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json full_response(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& ch = choices[i];
    json c = {
        {"index", i}, {"logprobs", ch.logprobs}, {"finish_reason", finish_reason_name(ch.finish)}};
    if (chat(m)) {
      c["message"] = {{"role", "assistant"}, {"content", ch.text}};
      if (!ch.reasoning.empty()) c["message"]["reasoning_content"] = ch.reasoning;
      if (!ch.calls.empty()) {
        if (ch.text.empty()) c["message"]["content"] = nullptr;
        c["message"]["tool_calls"] = tool_calls_json(ch.calls, false);
      }
    } else {
      c["text"] = ch.text;
    }
    out.push_back(std::move(c));
  }
  return {{"id", m.id},
          {"object", chat(m) ? "chat.completion" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", std::move(out)},
          {"usage", usage_json(u)}};
}

json role_chunk(const ResponseMeta& m, int index) {
  return chunk(m, json::array({choice(m, index, {{"role", "assistant"}, {"content", ""}}, "",
                                      nullptr, nullptr)}));
}

json reasoning_chunk(const ResponseMeta& m, int index, const std::string& text) {
  return chunk(
      m, json::array({choice(m, index, {{"reasoning_content", text}}, "", nullptr, nullptr)}));
}

json text_chunk(const ResponseMeta& m, int index, const std::string& text, const json& logprobs) {
  return chunk(m, json::array({choice(m, index, {{"content", text}}, text, nullptr, logprobs)}));
}

json tool_calls_chunk(const ResponseMeta& m, int index, const std::vector<ToolCall>& calls) {
  return chunk(m, json::array({choice(m, index, {{"tool_calls", tool_calls_json(calls, true)}}, "",
                                      nullptr, nullptr)}));
}

json finish_chunk(const ResponseMeta& m, int index, FinishReason finish, const json& logprobs) {
  return chunk(
      m, json::array({choice(m, index, json::object(), "", finish_reason_name(finish), logprobs)}));
}

json usage_chunk(const ResponseMeta& m, const Usage& u) {
  json j = chunk(m, json::array());
  j["usage"] = usage_json(u);
  return j;
}

json error_json(const std::string& message, const std::string& type, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", nullptr},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

}  // namespace ts::server

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
json choice(const ResponseMeta& m, json delta, const std::string& text, json finish) {
  json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}};
  if (chat(m)) {
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  return c;
}

}  // namespace

std::string new_response_id(ApiKind kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[25];
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(kind == ApiKind::Chat ? "chatcmpl-" : "cmpl-") + hex;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json full_response(const ResponseMeta& m, const std::string& text, FinishReason finish,
                   const Usage& u) {
  json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason_name(finish)}};
  if (chat(m)) {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    c["text"] = text;
  }
  return {{"id", m.id},
          {"object", chat(m) ? "chat.completion" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array({std::move(c)})},
          {"usage", usage_json(u)}};
}

json role_chunk(const ResponseMeta& m) {
  return chunk(m, json::array({choice(m, {{"role", "assistant"}, {"content", ""}}, "", nullptr)}));
}

json text_chunk(const ResponseMeta& m, const std::string& text) {
  return chunk(m, json::array({choice(m, {{"content", text}}, text, nullptr)}));
}

json finish_chunk(const ResponseMeta& m, FinishReason finish) {
  return chunk(m, json::array({choice(m, json::object(), "", finish_reason_name(finish))}));
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

// OpenAI response bodies: whole answers, server-sent-event chunks and error objects, for both
// /v1/completions ("text_completion") and /v1/chat/completions ("chat.completion[.chunk]").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/generator.h"
#include "server/api_request.h"
#include "server/job.h"
#include "text/tokenizer.h"

namespace ts::server {

struct ResponseMeta {
  ApiKind kind = ApiKind::Completion;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  std::string model;
  int64_t created = 0;         // Unix seconds
  bool include_usage = false;  // streamed: every chunk carries "usage" (null until the last)
  // Chat: the answer's <think> block is given as reasoning_content (text/reasoning.h); open when
  // the prompt already opened it.
  bool split_reasoning = false;
  bool thinking_open = false;
};

// A fresh response id for `kind`: a prefix and 24 random hex digits.
std::string new_response_id(ApiKind kind);

nlohmann::json usage_json(const Usage& u);

// One answer of a whole response (`n` of them: "choices", index in order). `logprobs`: null, or
// what logprobs_json made of every token. A chat answer's tool calls go in its message's
// "tool_calls" (its content null when it has no text).
struct Choice {
  std::string text;
  FinishReason finish = FinishReason::Length;
  nlohmann::json logprobs;
  std::vector<ToolCall> calls;
  std::string reasoning = {};  // chat: the thinking, as the message's reasoning_content ("" none)
};
nlohmann::json full_response(const ResponseMeta& m, const std::vector<Choice>& choices,
                             const Usage& u);
// Log-probabilities in the shape `m.kind`'s API gives them. Completions report each token's byte
// offset in the answer: `text_offset` is that of the first, and is moved past these tokens.
nlohmann::json logprobs_json(const ResponseMeta& m, const Tokenizer& tok,
                             const std::vector<TokenLogprobs>& lps, size_t& text_offset);

// Streaming, for the choice `index`: a chat answer opens with the assistant role; then one chunk
// per piece of text; a chunk with the finish reason; with include_usage a last chunk with no
// choices and the usage of them all.
nlohmann::json role_chunk(const ResponseMeta& m, int index);
nlohmann::json text_chunk(const ResponseMeta& m, int index, const std::string& text,
                          const nlohmann::json& logprobs);
// A chat stream's thinking, as a delta of its own: {"reasoning_content": text}.
nlohmann::json reasoning_chunk(const ResponseMeta& m, int index, const std::string& text);
// A chat stream's tool calls, whole, in one chunk before the finish.
nlohmann::json tool_calls_chunk(const ResponseMeta& m, int index,
                                const std::vector<ToolCall>& calls);
nlohmann::json finish_chunk(const ResponseMeta& m, int index, FinishReason finish,
                            const nlohmann::json& logprobs);
nlohmann::json usage_chunk(const ResponseMeta& m, const Usage& u);

// {"error": {"message", "type", "param": null, "code"}}; an empty code is null.
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& code);

// Serialisation that never throws: invalid UTF-8 (impossible from the detokenizer, possible in an
// echoed client string) becomes U+FFFD.
std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);

}  // namespace ts::server

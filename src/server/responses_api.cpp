#include "server/responses_api.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/api_response.h"
#include "server/responses_request.h"

namespace ts::server {
namespace {

using nlohmann::json;

std::string new_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

// The field an Input error names ("'text.format' must ..."), for the error's "param".
json param_of(const std::string& message) {
  if (message.size() < 2 || message[0] != '\'') return nullptr;
  const size_t close = message.find('\'', 1);
  return close == std::string::npos ? json(nullptr) : json(message.substr(1, close - 1));
}

void responses_error(httplib::Response& res, int status, const std::string& message,
                     const std::string& type, const std::string& code, json param = nullptr) {
  res.status = status;
  if (status == 503) res.set_header("Retry-After", "1");
  json e = error_json(message, type, code);
  e["error"]["param"] = std::move(param);
  res.set_content(dump(e), "application/json");
}

// One response in the making: the request's echo, the answer's parts as they arrive, and (while
// streamed) which output items are open.
struct ResponsesRelay {
  ResponsesRequest req;
  json prior = json::array();  // the conversation of previous_response_id
  std::string id = new_id("resp_");
  std::string model;
  int64_t created = unix_seconds();
  Generation gen;
  std::unique_ptr<AnswerReader> reader;
  ResponseStore* store = nullptr;

  std::string reasoning, content;
  std::string reasoning_id = new_id("rs_"), message_id = new_id("msg_");
  std::vector<std::string> call_ids, call_item_ids;  // made once the calls are known

  // Streaming.
  bool started = false;
  int64_t sequence = 0;
  int next_index = 0;
  std::optional<int> reasoning_index, message_index;
  bool reasoning_closed = false, message_closed = false;
};

json reasoning_item(const ResponsesRelay& r, const char* status) {
  json item = {{"id", r.reasoning_id},
               {"type", "reasoning"},
               {"status", status},
               {"summary", json::array()},
               {"content", json::array()}};
  if (!r.reasoning.empty()) {
    item["content"].push_back({{"type", "reasoning_text"}, {"text", r.reasoning}});
    // The server has no summariser: the summary asked for is the whole thinking.
    if (r.req.summary) item["summary"].push_back({{"type", "summary_text"}, {"text", r.reasoning}});
  }
  return item;
}

json text_part(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", json::array()},
          {"logprobs", json::array()}};
}

json message_item(const ResponsesRelay& r, const char* status, bool with_text) {
  return {{"id", r.message_id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", with_text ? json::array({text_part(r.content)}) : json::array()}};
}

json call_item(const ResponsesRelay& r, size_t i, const char* status, bool with_arguments) {
  const ToolCall& c = r.reader->last().tool_calls[i];
  return {{"id", r.call_item_ids[i]}, {"type", "function_call"},
          {"status", status},         {"call_id", r.call_ids[i]},
          {"name", c.name},           {"arguments", with_arguments ? c.arguments : ""}};
}

bool has_message(const ResponsesRelay& r) {
  return !r.content.empty() || r.reader == nullptr || !r.reader->done() ||
         r.reader->last().tool_calls.empty();
}

void name_calls(ResponsesRelay& r) {
  for (size_t i = r.call_ids.size(); i < r.reader->last().tool_calls.size(); ++i) {
    r.call_ids.push_back(new_id("call_"));
    r.call_item_ids.push_back(new_id("fc_"));
  }
}

// The output items of a finished answer, in output_index order.
json output_items(const ResponsesRelay& r) {
  json out = json::array();
  if (!r.reasoning.empty()) out.push_back(reasoning_item(r, "completed"));
  if (has_message(r)) out.push_back(message_item(r, "completed", true));
  for (size_t i = 0; i < r.call_ids.size(); ++i) out.push_back(call_item(r, i, "completed", true));
  return out;
}

json usage(const ResponsesRelay& r) {
  const Usage& u = r.reader->last().usage;
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The Response object; `status` in_progress, completed, incomplete or failed.
json response_object(const ResponsesRelay& r, const std::string& status, json output,
                     json usage_json, json error = nullptr) {
  const json& e = r.req.echo;
  const auto echoed = [&](const char* k, json def) { return e.contains(k) ? e[k] : def; };
  json j = {{"id", r.id},
            {"object", "response"},
            {"created_at", r.created},
            {"status", status},
            {"error", std::move(error)},
            {"incomplete_details", nullptr},
            {"instructions", echoed("instructions", nullptr)},
            {"max_output_tokens", echoed("max_output_tokens", nullptr)},
            {"model", r.model},
            {"output", std::move(output)},
            {"parallel_tool_calls", echoed("parallel_tool_calls", true)},
            {"previous_response_id", echoed("previous_response_id", nullptr)},
            {"reasoning", echoed("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
            {"store", r.req.store},
            {"temperature", echoed("temperature", 1.0)},
            {"text", echoed("text", json{{"format", {{"type", "text"}}}})},
            {"tool_choice", echoed("tool_choice", "auto")},
            {"tools", echoed("tools", json::array())},
            {"top_p", echoed("top_p", 1.0)},
            {"truncation", echoed("truncation", "disabled")},
            {"usage", std::move(usage_json)},
            {"user", echoed("user", nullptr)},
            {"metadata", echoed("metadata", json::object())}};
  if (status == "incomplete") j["incomplete_details"] = {{"reason", "max_output_tokens"}};
  return j;
}

// The finished response; stored for previous_response_id when the request asks (the default).
json finish_response(ResponsesRelay& r) {
  name_calls(r);
  const bool cut = r.reader->last().finish == FinishReason::Length;
  json resp = response_object(r, cut ? "incomplete" : "completed", output_items(r), usage(r));
  if (r.req.store && r.store != nullptr) {
    json conversation = r.prior;
    for (const json& m : r.req.new_messages) conversation.push_back(m);
    json answer = {{"role", "assistant"}, {"content", r.content}};
    if (!r.reasoning.empty()) answer["reasoning_content"] = r.reasoning;
    for (size_t i = 0; i < r.call_ids.size(); ++i) {
      const ToolCall& c = r.reader->last().tool_calls[i];
      answer["tool_calls"].push_back(
          {{"id", r.call_ids[i]},
           {"type", "function"},
           {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    conversation.push_back(std::move(answer));
    r.store->put(r.id, std::move(conversation), resp);
  }
  return resp;
}

// --- streaming ---

bool send(ResponsesRelay& r, httplib::DataSink& sink, const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = r.sequence++;
  const std::string s = "event: " + type + "\ndata: " + dump(data) + "\n\n";
  return sink.write(s.data(), s.size());
}

bool open_reasoning(ResponsesRelay& r, httplib::DataSink& sink) {
  if (r.reasoning_index) return true;
  r.reasoning_index = r.next_index++;
  const int idx = *r.reasoning_index;
  json item = reasoning_item(r, "in_progress");
  item["content"] = json::array();
  item["summary"] = json::array();
  if (!send(r, sink, "response.output_item.added", {{"output_index", idx}, {"item", item}}))
    return false;
  return !r.req.summary || send(r, sink, "response.reasoning_summary_part.added",
                                {{"item_id", r.reasoning_id},
                                 {"output_index", idx},
                                 {"summary_index", 0},
                                 {"part", {{"type", "summary_text"}, {"text", ""}}}});
}

bool close_reasoning(ResponsesRelay& r, httplib::DataSink& sink) {
  if (!r.reasoning_index || r.reasoning_closed) return true;
  r.reasoning_closed = true;
  const int idx = *r.reasoning_index;
  const json at = {{"item_id", r.reasoning_id}, {"output_index", idx}};
  json text_done = at;
  text_done["content_index"] = 0;
  text_done["text"] = r.reasoning;
  if (!send(r, sink, "response.reasoning_text.done", text_done)) return false;
  if (r.req.summary) {
    json s = at;
    s["summary_index"] = 0;
    s["text"] = r.reasoning;
    if (!send(r, sink, "response.reasoning_summary_text.done", s)) return false;
    s.erase("text");
    s["part"] = {{"type", "summary_text"}, {"text", r.reasoning}};
    if (!send(r, sink, "response.reasoning_summary_part.done", s)) return false;
  }
  return send(r, sink, "response.output_item.done",
              {{"output_index", idx}, {"item", reasoning_item(r, "completed")}});
}

bool open_message(ResponsesRelay& r, httplib::DataSink& sink) {
  if (r.message_index) return true;
  r.message_index = r.next_index++;
  const int idx = *r.message_index;
  return send(r, sink, "response.output_item.added",
              {{"output_index", idx}, {"item", message_item(r, "in_progress", false)}}) &&
         send(r, sink, "response.content_part.added",
              {{"item_id", r.message_id},
               {"output_index", idx},
               {"content_index", 0},
               {"part", text_part("")}});
}

bool close_message(ResponsesRelay& r, httplib::DataSink& sink) {
  if (!r.message_index || r.message_closed) return true;
  r.message_closed = true;
  const int idx = *r.message_index;
  const json at = {{"item_id", r.message_id}, {"output_index", idx}, {"content_index", 0}};
  json done = at;
  done["text"] = r.content;
  done["logprobs"] = json::array();
  json part = at;
  part["part"] = text_part(r.content);
  return send(r, sink, "response.output_text.done", done) &&
         send(r, sink, "response.content_part.done", part) &&
         send(r, sink, "response.output_item.done",
              {{"output_index", idx}, {"item", message_item(r, "completed", true)}});
}

bool send_calls(ResponsesRelay& r, httplib::DataSink& sink) {
  name_calls(r);
  for (size_t i = 0; i < r.call_ids.size(); ++i) {
    const int idx = r.next_index++;
    const std::string& args = r.reader->last().tool_calls[i].arguments;
    const json at = {{"item_id", r.call_item_ids[i]}, {"output_index", idx}};
    json delta = at, done = at;
    delta["delta"] = args;
    done["arguments"] = args;
    if (!send(r, sink, "response.output_item.added",
              {{"output_index", idx}, {"item", call_item(r, i, "in_progress", false)}}) ||
        !send(r, sink, "response.function_call_arguments.delta", delta) ||
        !send(r, sink, "response.function_call_arguments.done", done) ||
        !send(r, sink, "response.output_item.done",
              {{"output_index", idx}, {"item", call_item(r, i, "completed", true)}}))
      return false;
  }
  return true;
}

// One call of the stream's provider: the opening events once, then what arrived within one poll
// as deltas of the open item, and at the end the items' closing events and the whole response.
bool relay_events(ResponsesRelay& r, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  if (!r.started) {
    r.started = true;
    const json resp = response_object(r, "in_progress", json::array(), nullptr);
    if (!send(r, sink, "response.created", {{"response", resp}}) ||
        !send(r, sink, "response.in_progress", {{"response", resp}}))
      return false;
  }
  const ReasoningSplitter::Parts p = r.reader->take(kRoutePoll);
  if (!p.reasoning.empty()) {
    if (!open_reasoning(r, sink)) return false;
    r.reasoning += p.reasoning;
    const json at = {{"item_id", r.reasoning_id}, {"output_index", *r.reasoning_index}};
    json d = at;
    d["content_index"] = 0;
    d["delta"] = p.reasoning;
    if (!send(r, sink, "response.reasoning_text.delta", d)) return false;
    if (r.req.summary) {
      json s = at;
      s["summary_index"] = 0;
      s["delta"] = p.reasoning;
      if (!send(r, sink, "response.reasoning_summary_text.delta", s)) return false;
    }
  }
  if (!p.content.empty()) {
    if (!close_reasoning(r, sink) || !open_message(r, sink)) return false;
    r.content += p.content;
    if (!send(r, sink, "response.output_text.delta",
              {{"item_id", r.message_id},
               {"output_index", *r.message_index},
               {"content_index", 0},
               {"delta", p.content},
               {"logprobs", json::array()}}))
      return false;
  }
  if (!r.reader->done()) return true;
  const JobUpdate& u = r.reader->last();
  if (!u.error.empty()) {
    send(r, sink, "error", {{"code", "server_error"}, {"message", u.error}, {"param", nullptr}});
    send(r, sink, "response.failed",
         {{"response", response_object(r, "failed", json::array(), nullptr,
                                       {{"code", "server_error"}, {"message", u.error}})}});
    sink.done();
    return true;
  }
  if (!close_reasoning(r, sink)) return false;
  if (has_message(r) && !(open_message(r, sink) && close_message(r, sink))) return false;
  if (!send_calls(r, sink)) return false;
  const json resp = finish_response(r);
  const std::string type =
      resp["status"] == "incomplete" ? "response.incomplete" : "response.completed";
  if (!send(r, sink, type, {{"response", resp}})) return false;
  sink.done();
  return true;
}

void answer_whole(ResponsesRelay& r, httplib::Response& res, const httplib::Server& svr) {
  while (!r.reader->done()) {
    const ClientState state = client_state(svr);
    if (state == ClientState::Gone) return;
    if (state == ClientState::Stopping)
      return responses_error(res, 503, "the server is shutting down", "server_error", "");
    const ReasoningSplitter::Parts p = r.reader->take(kRoutePoll);
    r.reasoning += p.reasoning;
    r.content += p.content;
  }
  if (!r.reader->last().error.empty())
    return responses_error(res, 500, r.reader->last().error, "server_error", "");
  res.set_content(dump(finish_response(r)), "application/json");
}

void create(const RouteContext& ctx, ResponseStore& store, const std::string& text,
            httplib::Response& res) {
  json body;
  try {
    body = parse_json_bounded(text, "the request body");
  } catch (const Error& e) {
    return responses_error(res, 400, e.what(), "invalid_request_error", "");
  }
  if (!body.is_object())
    return responses_error(res, 400, "the request body must be a JSON object",
                           "invalid_request_error", "");
  auto r = std::make_shared<ResponsesRelay>();
  r->model = ctx.gen.model_id;
  r->store = &store;
  try {
    const std::string previous = previous_response_id(body);
    if (!previous.empty()) {
      const std::optional<StoredResponse> prev = store.get(previous);
      if (!prev)
        return responses_error(res, 404,
                               "Previous response with id '" + previous +
                                   "' not found (it was never stored, or the server's bound "
                                   "on stored responses let it go)",
                               "invalid_request_error", "previous_response_not_found",
                               "previous_response_id");
      r->prior = prev->conversation;
    }
    r->req = parse_responses_request(body, r->prior);
    r->gen = start_generation(ctx.gen, r->req.api);
  } catch (const Error& e) {
    return responses_error(res, 400, e.what(), "invalid_request_error", "", param_of(e.what()));
  } catch (const RouteError& e) {
    return responses_error(res, e.status, e.message, e.type, e.code,
                           e.status == 404 ? json("model") : param_of(e.message));
  }
  r->reader = std::make_unique<AnswerReader>(r->gen.jobs.front(), r->gen.split_reasoning,
                                             r->gen.thinking_open);
  if (!r->req.stream) {
    answer_whole(*r, res, ctx.svr);
    return r->gen.cancel_all();  // a no-op unless the client left or the server stops
  }
  const auto provider = [r](size_t, httplib::DataSink& sink) {
    // httplib calls providers outside its handler try-block: nothing may escape.
    try {
      return relay_events(*r, sink);
    } catch (const std::exception&) {
      return false;
    }
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", provider,
                                   [r](bool) { r->gen.cancel_all(); });
}

}  // namespace

void add_responses_routes(httplib::Server& svr, const RouteContext& ctx, ResponseStore& store) {
  svr.Post("/v1/responses", [ctx, &store](const httplib::Request&, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
    std::string text, message;
    if (const int status = read_request_body(reader, ctx.max_body_bytes, text, message))
      return responses_error(res, status, message, "invalid_request_error",
                             status == 413 ? "request_too_large" : "");
    create(ctx, store, text, res);
  });
  svr.Get(R"(/v1/responses/([^/]+))", [&store](const httplib::Request& req,
                                               httplib::Response& res) {
    const std::optional<StoredResponse> s = store.get(req.matches[1]);
    if (!s)
      return responses_error(res, 404, "No response with id '" + std::string(req.matches[1]) + "'",
                             "invalid_request_error", "not_found");
    res.set_content(dump(s->response), "application/json");
  });
  svr.Delete(R"(/v1/responses/([^/]+))",
             [&store](const httplib::Request& req, httplib::Response& res) {
               const std::string id = req.matches[1];
               if (!store.erase(id))
                 return responses_error(res, 404, "No response with id '" + id + "'",
                                        "invalid_request_error", "not_found");
               res.set_content(dump(json{{"id", id}, {"object", "response"}, {"deleted", true}}),
                               "application/json");
             });
}

}  // namespace ts::server

#include "server/ollama_api.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/api_response.h"
#include "server/json_fields.h"
#include "server/ollama_request.h"

namespace ts::server {
namespace {

using nlohmann::json;

constexpr int64_t kNsPerUs = 1000;

json model_details(const ModelInfo& m) {
  return {{"parent_model", ""},   {"format", m.format},
          {"family", m.family},   {"families", json::array({m.family})},
          {"parameter_size", ""}, {"quantization_level", ""}};
}

const char* done_reason(FinishReason f) {
  return f == FinishReason::Length ? "length" : "stop";
}

// The model's tool calls in Ollama's shape: arguments as an object, not as JSON text.
json ollama_tool_calls(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    json args = json::object();
    try {
      args = parse_json_bounded(c.arguments, "a tool call's arguments");
    } catch (const Error&) {
      // The call was held to its schema while generated; an unreadable one keeps no arguments.
    }
    out.push_back({{"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
  }
  return out;
}

// What a chat or generate answer relays across the stream provider's calls.
struct OllamaRelay {
  bool chat = true;
  std::string model;
  Generation gen;
  std::unique_ptr<AnswerReader> reader;
  std::string content, reasoning;  // gathered (not streamed)
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// One NDJSON object of the answer: `content` / `thinking` as the message (chat) or the response.
json part_json(const OllamaRelay& r, const std::string& content, const std::string& thinking,
               bool done) {
  json j = {{"model", r.model}, {"created_at", rfc3339(std::chrono::system_clock::now())}};
  if (r.chat) {
    j["message"] = {{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) j["message"]["thinking"] = thinking;
  } else {
    j["response"] = content;
    if (!thinking.empty()) j["thinking"] = thinking;
  }
  j["done"] = done;
  return j;
}

// The closing fields: how it ended, token counts and durations in nanoseconds.
void add_stats(json& j, const OllamaRelay& r) {
  const JobUpdate& u = r.reader->last();
  const int64_t total_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - r.start)
                               .count();
  j["done_reason"] = done_reason(u.finish);
  j["total_duration"] = total_us * kNsPerUs;
  j["load_duration"] = 0;
  j["prompt_eval_count"] = u.usage.prompt_tokens;
  j["prompt_eval_duration"] = r.reader->first_text_us() * kNsPerUs;
  j["eval_count"] = u.usage.completion_tokens;
  j["eval_duration"] = (r.reader->end_us() - r.reader->first_text_us()) * kNsPerUs;
}

std::string line(const json& j) {
  return dump(j) + "\n";
}

bool write(httplib::DataSink& sink, const std::string& s) {
  return sink.write(s.data(), s.size());
}

// One call of a streamed answer's provider: sends what arrived within one poll as a line; the
// last lines carry the tool calls and the statistics.
bool relay_lines(OllamaRelay& r, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  const ReasoningSplitter::Parts p = r.reader->take(kRoutePoll);
  if ((!p.content.empty() || !p.reasoning.empty()) &&
      !write(sink, line(part_json(r, p.content, p.reasoning, false))))
    return false;
  if (!r.reader->done()) return true;
  const JobUpdate& u = r.reader->last();
  if (!u.error.empty()) {
    write(sink, line(json{{"error", u.error}}));
    sink.done();
    return true;
  }
  if (!u.tool_calls.empty()) {
    json calls = part_json(r, "", "", false);
    calls["message"]["tool_calls"] = ollama_tool_calls(u.tool_calls);
    if (!write(sink, line(calls))) return false;
  }
  json last = part_json(r, "", "", true);
  add_stats(last, r);
  if (!write(sink, line(last))) return false;
  sink.done();
  return true;
}

void answer_whole(OllamaRelay& r, httplib::Response& res, const httplib::Server& svr) {
  while (!r.reader->done()) {
    const ClientState state = client_state(svr);
    if (state == ClientState::Gone) return;
    if (state == ClientState::Stopping)
      return ollama_error(res, 503, "the server is shutting down");
    const ReasoningSplitter::Parts p = r.reader->take(kRoutePoll);
    r.content += p.content;
    r.reasoning += p.reasoning;
  }
  const JobUpdate& u = r.reader->last();
  if (!u.error.empty()) return ollama_error(res, 500, u.error);
  json j = part_json(r, r.content, r.reasoning, true);
  if (r.chat && !u.tool_calls.empty()) j["message"]["tool_calls"] = ollama_tool_calls(u.tool_calls);
  add_stats(j, r);
  res.set_content(dump(j), "application/json");
}

void generate(const RouteContext& ctx, bool chat, const std::string& text, httplib::Response& res) {
  json body;
  try {
    body = parse_json_bounded(text, "the request body");
  } catch (const Error& e) {
    return ollama_error(res, 400, e.what());
  }
  if (!body.is_object()) return ollama_error(res, 400, "the request body must be a JSON object");
  auto relay = std::make_shared<OllamaRelay>();
  relay->chat = chat;
  relay->model = ctx.gen.model_id;
  OllamaRequest req;
  try {
    req = chat ? parse_ollama_chat(body) : parse_ollama_generate(body, ctx.gen.chat.has_value());
    if (req.load_only) {
      if (req.api.model != ctx.gen.model_id)
        return ollama_error(res, 404, "model '" + req.api.model + "' not found");
      // Ollama's "load the model" call: the model is always loaded here.
      json j = part_json(*relay, "", "", true);
      j["done_reason"] = "load";
      return res.set_content(dump(j), "application/json");
    }
    relay->gen = start_generation(ctx.gen, req.api);
  } catch (const Error& e) {
    return ollama_error(res, 400, e.what());
  } catch (const RouteError& e) {
    return ollama_error(res, e.status, e.message);
  }
  relay->reader = std::make_unique<AnswerReader>(relay->gen.jobs.front(), relay->gen);
  if (!req.stream) {
    answer_whole(*relay, res, ctx.svr);
    return relay->gen.cancel_all();  // a no-op unless the client left or the server stops
  }
  const auto provider = [relay](size_t, httplib::DataSink& sink) {
    // httplib calls providers outside its handler try-block: nothing may escape.
    try {
      return relay_lines(*relay, sink);
    } catch (const std::exception&) {
      return false;
    }
  };
  res.set_chunked_content_provider("application/x-ndjson", provider,
                                   [relay](bool) { relay->gen.cancel_all(); });
}

json tags_json(const RouteContext& ctx) {
  const ModelInfo& m = ctx.model;
  return {{"name", ctx.gen.model_id},
          {"model", ctx.gen.model_id},
          {"modified_at", rfc3339_unix(m.modified_unix)},
          {"size", m.size_bytes},
          {"details", model_details(m)}};
}

json show_json(const RouteContext& ctx) {
  const ModelInfo& m = ctx.model;
  // An encoder only embeds.
  json capabilities =
      json::array({ctx.gen.sched.cannot_generate().empty() ? "completion" : "embedding"});
  if (ctx.gen.chat) {
    capabilities.push_back("tools");
    if (ctx.gen.chat->thinks()) capabilities.push_back("thinking");
  }
  json info = {{"general.architecture", m.family}};
  if (m.trained_context > 0) info[m.family + ".context_length"] = m.trained_context;
  return {{"modelfile", "# served by turbospark\nFROM " + ctx.gen.model_id + "\n"},
          {"parameters", "num_ctx " + std::to_string(m.slot_context)},
          {"template", ""},
          {"details", model_details(m)},
          {"model_info", std::move(info)},
          {"capabilities", std::move(capabilities)},
          {"modified_at", rfc3339_unix(m.modified_unix)}};
}

}  // namespace

void ollama_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  if (status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(json{{"error", message}}), "application/json");
}

void add_ollama_routes(httplib::Server& svr, const RouteContext& ctx) {
  svr.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"version", kOllamaApiVersion}}), "application/json");
  });
  svr.Get("/api/tags", [ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"models", json::array({tags_json(ctx)})}}), "application/json");
  });
  svr.Get("/api/ps", [ctx](const httplib::Request&, httplib::Response& res) {
    json m = tags_json(ctx);
    m["size_vram"] = 0;
    m["context_length"] = ctx.model.slot_context;
    res.set_content(dump(json{{"models", json::array({m})}}), "application/json");
  });
  svr.Post("/api/show", [ctx](const httplib::Request&, httplib::Response& res,
                              const httplib::ContentReader& reader) {
    std::string text, message;
    if (const int status = read_request_body(reader, ctx.max_body_bytes, text, message))
      return ollama_error(res, status, message);
    try {
      const json body = parse_json_bounded(text, "the request body");
      if (!body.is_object())
        return ollama_error(res, 400, "the request body must be a JSON object");
      // "name" is the older spelling of "model".
      std::string model = string(body, "model");
      if (model.empty()) model = string(body, "name");
      if (model.empty()) bad("model", "is required");
      if (model.ends_with(":latest")) model.resize(model.size() - 7);
      if (model != ctx.gen.model_id)
        return ollama_error(res, 404, "model '" + model + "' not found");
      res.set_content(dump(show_json(ctx)), "application/json");
    } catch (const Error& e) {
      ollama_error(res, 400, e.what());
    }
  });
  for (const auto& [path, chat] : {std::pair{"/api/chat", true}, {"/api/generate", false}})
    svr.Post(path, [ctx, chat](const httplib::Request&, httplib::Response& res,
                               const httplib::ContentReader& reader) {
      std::string text, message;
      if (const int status = read_request_body(reader, ctx.max_body_bytes, text, message))
        return ollama_error(res, status, message);
      generate(ctx, chat, text, res);
    });
}

}  // namespace ts::server

#include "server/embeddings_api.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/access_log.h"
#include "server/api_response.h"
#include "server/embedding_inputs.h"
#include "server/http_errors.h"
#include "server/json_fields.h"
#include "server/ollama_api.h"

namespace ts::server {
namespace {

using nlohmann::json;

struct Embedded {
  std::vector<std::vector<float>> vectors;  // in input order
  int64_t prompt_tokens = 0;
};

// The refusal of an embedding request by a model that cannot serve one, before its inputs are
// read; "'dimensions' ..." when it asks for a size other than the model's.
void check_model(const JobRunner& sched, const json& body) {
  if (sched.embedding().pooling == Pooling::None)
    fail(ErrorKind::Input, sched.embedding().why_none);
  const int64_t d = sched.embedding_size();
  if (integer(body, "dimensions", 1, INT32_MAX, d) != d)
    bad("dimensions", "must be " + std::to_string(d) +
                          ", the model's size: its files declare no shorter (Matryoshka) sizes");
}

std::string input_name(const char* field, size_t i, size_t n) {
  return n == 1 ? std::string(field) : std::string(field) + "[" + std::to_string(i) + "]";
}

// Runs every input as an embedding job, at most the runner's embedding_window() of them queued at
// once. False when the
// client left (the jobs are cancelled); throws RouteError for a refusal or a failed job.
bool embed_all(const RouteContext& ctx, const char* field,
               const std::vector<std::vector<int32_t>>& inputs, Embedded& out) {
  JobRunner& sched = ctx.gen.sched;
  const size_t n = inputs.size();
  const size_t window = std::max<size_t>(1, sched.embedding_window());
  std::vector<std::shared_ptr<Job>> jobs(n);
  struct CancelLeft {
    std::vector<std::shared_ptr<Job>>& jobs;
    ~CancelLeft() {
      for (const auto& j : jobs)
        if (j) j->cancel();
    }
  } cancel_left{jobs};
  out.vectors.assign(n, {});
  size_t next = 0, first = 0;  // jobs [first, next) are queued, some maybe done
  while (first < n) {
    while (next < n && next - first < window) {
      GenRequest g;
      g.prompt = inputs[next];
      g.embed = true;
      try {
        jobs[next] = sched.submit(std::move(g));
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Runtime) throw RouteError{503, e.what(), "server_error", ""};
        throw RouteError{400, "'" + input_name(field, next, n) + "': " + e.what(),
                         "invalid_request_error", ""};
      }
      if (jobs[next] == nullptr) {
        if (next > first) break;  // ours come back first
        throw RouteError{503, "the queue of waiting requests is full, try again shortly",
                         "server_error", "queue_full"};
      }
      ++next;
    }
    const ClientState state = client_state(ctx.svr);
    if (state == ClientState::Gone) return false;
    if (state == ClientState::Stopping)
      throw RouteError{503, "the server is shutting down", "server_error", ""};
    const auto wait = std::max(std::chrono::milliseconds(1),
                               kRoutePoll / static_cast<int>(std::max<size_t>(next - first, 1)));
    for (size_t i = first; i < next; ++i) {
      if (jobs[i] == nullptr) continue;
      const JobUpdate u = jobs[i]->take(wait);
      if (!u.done) continue;
      if (!u.error.empty()) throw RouteError{500, u.error, "server_error", ""};
      out.vectors[i] = u.embedding;
      out.prompt_tokens += u.usage.prompt_tokens;
      access_usage(u.usage.prompt_tokens, 0);
      jobs[i] = nullptr;
    }
    while (first < next && jobs[first] == nullptr) ++first;
  }
  return true;
}

std::string base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = 0;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(u >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    const uint32_t w = (uint32_t{bytes[i]} << 16) | (left > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (left > 2 ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += left > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    out += left > 2 ? kAlphabet[w & 63] : '=';
  }
  return out;
}

// Parses the body as a JSON object; false with the refusal written in the route's shape.
template <typename Refuse>
bool read_object(const RouteContext& ctx, const httplib::ContentReader& reader, json& body,
                 Refuse refuse) {
  std::string text, message;
  if (const int status = read_request_body(reader, ctx.max_body_bytes, text, message)) {
    refuse(status, message, status == 413 ? "request_too_large" : "");
    return false;
  }
  try {
    body = parse_json_bounded(text, "the request body");
  } catch (const Error& e) {
    refuse(400, e.what(), "");
    return false;
  }
  if (body.is_object()) return true;
  refuse(400, "the request body must be a JSON object", "");
  return false;
}

void openai_embeddings(const RouteContext& ctx, const json& body, httplib::Response& res) {
  const std::string model = string(body, "model");
  if (!model.empty() && model != ctx.gen.model_id)
    throw RouteError{
        404,
        "the model '" + model + "' does not exist: this server serves '" + ctx.gen.model_id + "'",
        "invalid_request_error", "model_not_found"};
  check_model(ctx.gen.sched, body);
  const std::string format = string(body, "encoding_format");
  if (!format.empty() && format != "float" && format != "base64")
    bad("encoding_format", "must be 'float' or 'base64', got '" + format + "'");
  const json* input = get(body, "input");
  if (input == nullptr) bad("input", "is required");
  Embedded e;
  if (!embed_all(ctx, "input", embedding_inputs(ctx.gen.tok, *input, {}), e)) return;
  json data = json::array();
  for (size_t i = 0; i < e.vectors.size(); ++i)
    data.push_back(
        {{"object", "embedding"},
         {"index", i},
         {"embedding", format == "base64" ? json(base64(e.vectors[i])) : json(e.vectors[i])}});
  res.set_content(
      dump(
          json{{"object", "list"},
               {"data", std::move(data)},
               {"model", ctx.gen.model_id},
               {"usage", {{"prompt_tokens", e.prompt_tokens}, {"total_tokens", e.prompt_tokens}}}}),
      "application/json");
}

void refuse_unknown(const json& body, const std::set<std::string>& known) {
  for (const auto& [name, value] : body.items())
    if (known.count(name) == 0) bad(name, "is not a field this server implements");
}

// Ollama's /api/embed (legacy: /api/embeddings, one `prompt`, one `embedding`).
void ollama_embed(const RouteContext& ctx, const json& body, bool legacy, httplib::Response& res) {
  const auto start = std::chrono::steady_clock::now();
  if (legacy)
    refuse_unknown(body, {"model", "prompt", "options", "keep_alive"});
  else
    refuse_unknown(body, {"model", "input", "truncate", "options", "keep_alive", "dimensions"});
  std::string model = string(body, "model");
  if (model.empty()) bad("model", "is required");
  if (model.ends_with(":latest")) model.resize(model.size() - 7);
  if (model != ctx.gen.model_id)
    throw RouteError{404, "model '" + model + "' not found", "invalid_request_error", ""};
  if (const json* opts = get(body, "options"); opts != nullptr && !opts->is_object())
    bad("options", "must be an object");
  check_model(ctx.gen.sched, body);
  const char* field = legacy ? "prompt" : "input";
  const json* input = get(body, field);
  if (input == nullptr) bad(field, "is required");
  if (legacy && !input->is_string()) bad(field, "must be a string");
  EmbeddingInputRules rules{field, false, -1};
  if (!legacy && boolean(body, "truncate", true)) rules.truncate = ctx.gen.sched.options().ctx;
  Embedded e;
  if (!embed_all(ctx, field, embedding_inputs(ctx.gen.tok, *input, rules), e)) return;
  json j;
  if (legacy) {
    j = {{"embedding", e.vectors.front()}};
  } else {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    j = {{"model", model},
         {"embeddings", e.vectors},
         {"total_duration", ns},
         {"load_duration", 0},
         {"prompt_eval_count", e.prompt_tokens}};
  }
  res.set_content(dump(j), "application/json");
}

}  // namespace

void add_embedding_routes(httplib::Server& svr, const RouteContext& ctx) {
  svr.Post("/v1/embeddings", [ctx](const httplib::Request&, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
    const auto refuse = [&res](int status, const std::string& message, const std::string& code) {
      const auto [type, kind_code] = error_kind(status);
      res.status = status;
      if (status == 503) res.set_header("Retry-After", "1");
      res.set_content(dump(error_json(message, type, code.empty() ? kind_code : code)),
                      "application/json");
    };
    json body;
    if (!read_object(ctx, reader, body, refuse)) return;
    try {
      openai_embeddings(ctx, body, res);
    } catch (const Error& e) {
      refuse(400, e.what(), "");
    } catch (const RouteError& e) {
      refuse(e.status, e.message, e.code);
    }
  });
  for (const auto& [path, legacy] : {std::pair{"/api/embed", false}, {"/api/embeddings", true}})
    svr.Post(path, [ctx, legacy](const httplib::Request&, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
      const auto refuse = [&res](int status, const std::string& message, const std::string&) {
        ollama_error(res, status, message);
      };
      json body;
      if (!read_object(ctx, reader, body, refuse)) return;
      try {
        ollama_embed(ctx, body, legacy, res);
      } catch (const Error& e) {
        ollama_error(res, 400, e.what());
      } catch (const RouteError& e) {
        ollama_error(res, e.status, e.message);
      }
    });
}

}  // namespace ts::server

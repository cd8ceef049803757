#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/chat_page.h"
#include "server/connection_gate.h"
#include "server/embeddings_api.h"
#include "server/generation.h"
#include "server/http_errors.h"
#include "server/ollama_api.h"
#include "server/request_server.h"
#include "server/responses_api.h"
#include "server/route_support.h"
#include "server/socket_stream.h"
#include "server/tokenize_api.h"
#include "text/reasoning.h"

namespace ts::server {
namespace {

using nlohmann::json;

// How often a handler waiting for tokens checks that its client is still connected.
constexpr auto kPoll = std::chrono::milliseconds(50);
constexpr size_t kSpareRequestWorkers = 8;
constexpr size_t kMaxRequestWorkers = 1024;
// A request (head and body) must have arrived this long after its connection was accepted.
constexpr auto kRequestReadTime = std::chrono::seconds(30);
// A response write that makes no progress for this long ends the connection (and its jobs).
constexpr auto kWriteTimeout = std::chrono::milliseconds(10000);
// A chunked body's framing (sizes, extensions, trailers) may add this much to what the socket
// delivers beyond the body limit; past it the request is refused whatever it decodes to.
constexpr size_t kFramingAllowance = 64u << 10;

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type, const std::string& code) {
  res.status = status;
  // A refusal for load: the client may try again shortly.
  if (status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(error_json(message, type, code)), "application/json");
}

// GET /metrics: the scheduler's counters in Prometheus' text format, for a server's dashboards.
std::string metrics_text(const SchedulerStats& s) {
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    out += std::string("# HELP turbospark_") + name + " " + help + "\n# TYPE turbospark_" + name +
           " " + type + "\nturbospark_" + name + " " + std::to_string(value) + "\n";
  };
  metric("forward_passes_total", "counter", "Forward passes run.", s.steps);
  metric("decode_rows_total", "counter",
         "Rows that were a running sequence's last token or a guess after it.", s.decode_rows);
  metric("lookup_drafted_total", "counter", "Tokens guessed by prompt lookup.", s.drafted);
  metric("lookup_matched_total", "counter", "Guessed tokens that were the tokens sampled.",
         s.draft_matched);
  metric("prefill_rows_total", "counter", "Rows that were prompt tokens.", s.prefill_rows);
  metric("cached_prompt_tokens_total", "counter",
         "Prompt tokens taken from a slot's cache instead of prefilled.", s.cached_rows);
  metric("slots", "gauge", "Sequences that can generate at once.",
         static_cast<uint64_t>(s.slots_total));
  metric("slots_busy", "gauge", "Slots serving a request.", static_cast<uint64_t>(s.slots_busy));
  metric("requests_queued", "gauge", "Requests waiting for a slot.", s.queued);
  return out;
}

void bad_request(httplib::Response& res, const std::string& message) {
  send_error(res, 400, message, "invalid_request_error", "");
}

// Compares without an early exit, so the time taken does not tell how much of a key was right.
// `expected` is never empty (it holds at least "Bearer ").
bool same_secret(const std::string& given, const std::string& expected) {
  size_t diff = given.size() ^ expected.size();
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i]) ^
            static_cast<unsigned char>(expected[i % expected.size()]);
  return diff == 0;
}

// A request holds its worker while it waits and generates, so every slot and queue place needs
// one; the spare ones answer the requests refused at once (bad JSON, queue full, ...).
size_t request_workers(int asked, const SchedulerOptions& s) {
  if (asked > 0) return static_cast<size_t>(asked);
  const size_t want = static_cast<size_t>(s.parallel) + s.queue_capacity + kSpareRequestWorkers;
  return std::min(want, kMaxRequestWorkers);
}

// The body whole, or false with `res` answered (413 or 400).
bool read_body(const httplib::ContentReader& reader, size_t limit, std::string& body,
               httplib::Response& res) {
  std::string message;
  const int status = read_request_body(reader, limit, body, message);
  if (status == 0) return true;
  send_error(res, status, message, "invalid_request_error",
             status == 413 ? "request_too_large" : "");
  return false;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a response relays from the job of one of its choices, across the provider's calls.
struct ChoiceRelay {
  std::shared_ptr<Job> job;
  bool opened = false;
  bool done = false;
  Choice answer;                   // the text so far (not streamed), then how it ended
  std::vector<TokenLogprobs> lps;  // not yet sent
  size_t text_offset = 0;          // of the next token in the answer (completions' logprobs)
  std::unique_ptr<AnswerSplitter> reasoning;  // chat answers of a thinking model
};

struct Relay {
  std::vector<ChoiceRelay> choices;  // the request's `n`, in index order
  ResponseMeta meta;
  const Tokenizer* tok = nullptr;
  bool logprobs = false;
  Usage usage;  // each prompt once (its first choice's), the completion tokens of them all
  size_t per_prompt = 1;  // choices of each prompt (`n`), prompt by prompt
};

bool write(httplib::DataSink& sink, const std::string& s) {
  return sink.write(s.data(), s.size());
}

// A choice's log-probabilities not yet sent, in the response's shape; null when none were asked
// for.
json take_logprobs(Relay& r, ChoiceRelay& c) {
  if (!r.logprobs) return nullptr;
  json j = logprobs_json(r.meta, *r.tok, c.lps, c.text_offset);
  c.lps.clear();
  return j;
}

// A streamed chat answer's thinking and reply, each as deltas of their own.
bool send_parts(Relay& r, ChoiceRelay& c, int index, const AnswerSplitter::Parts& parts,
                httplib::DataSink& sink) {
  if (!parts.reasoning.empty() &&
      !write(sink, sse_event(reasoning_chunk(r.meta, index, parts.reasoning))))
    return false;
  return parts.content.empty() ||
         write(sink, sse_event(text_chunk(r.meta, index, parts.content, take_logprobs(r, c))));
}

void collect(ChoiceRelay& c, const AnswerSplitter::Parts& parts) {
  c.answer.reasoning += parts.reasoning;
  c.answer.text += parts.content;
}

// Takes what choice `i`'s job has for the response (waiting up to `wait`): false while it runs.
// The first choice to end with an error ends the response with it (the releaser cancels the
// others).
bool take_choice(Relay& r, size_t i, std::chrono::milliseconds wait, JobUpdate& u) {
  ChoiceRelay& c = r.choices[i];
  u = c.job->take(wait);
  c.lps.insert(c.lps.end(), u.logprobs.begin(), u.logprobs.end());
  if (!u.done) return false;
  c.done = true;
  c.answer.finish = u.finish;
  c.answer.calls = u.tool_calls;
  // A prompt is counted once, by the first of its choices (a list of prompts has several).
  const bool counts_prompt = i % r.per_prompt == 0;
  if (counts_prompt) {
    r.usage.prompt_tokens += u.usage.prompt_tokens;
    r.usage.cached_tokens += u.usage.cached_tokens;
  }
  r.usage.completion_tokens += u.usage.completion_tokens;
  access_usage(counts_prompt ? u.usage.prompt_tokens : 0, u.usage.completion_tokens);
  return true;
}

bool all_done(const Relay& r) {
  return std::all_of(r.choices.begin(), r.choices.end(),
                     [](const ChoiceRelay& c) { return c.done; });
}

// Each choice's wait in one call of a provider: the call as a whole waits about kPoll.
std::chrono::milliseconds choice_poll(const Relay& r) {
  return std::max(std::chrono::milliseconds(1), kPoll / static_cast<int>(r.choices.size()));
}

// One call of a streamed response's provider: waits a little for text and sends it as chunks,
// each choice's under its index. httplib calls it until it calls sink.done() or returns false
// (the client is gone); then the releaser cancels the jobs. is_writable() also sees a peer that
// has closed its end, so a client that leaves while its request waits or generates is noticed
// within one poll.
bool relay_stream(Relay& r, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  for (size_t i = 0; i < r.choices.size(); ++i) {
    ChoiceRelay& c = r.choices[i];
    if (c.done) continue;
    const int index = static_cast<int>(i);
    if (!c.opened) {
      c.opened = true;
      if (r.meta.kind == ApiKind::Chat && !write(sink, sse_event(role_chunk(r.meta, index))))
        return false;
    }
    JobUpdate u;
    const bool ended = take_choice(r, i, choice_poll(r), u);
    // A token's log-probability rides on the next chunk of text: its own text may still be held
    // back (an unfinished character, the start of a stop string).
    for (const std::string& piece : u.pieces) {
      const bool sent =
          c.reasoning
              ? send_parts(r, c, index, c.reasoning->feed(piece), sink)
              : write(sink, sse_event(text_chunk(r.meta, index, piece, take_logprobs(r, c))));
      if (!sent) return false;
    }
    if (!ended) continue;
    if (c.reasoning && !send_parts(r, c, index, c.reasoning->finish(), sink)) return false;
    if (!u.error.empty()) {
      if (!write(sink, sse_event(error_json(u.error, "server_error", "")))) return false;
      if (!write(sink, "data: [DONE]\n\n")) return false;
      sink.done();
      return true;
    }
    if (!u.tool_calls.empty() &&
        !write(sink, sse_event(tool_calls_chunk(r.meta, index, u.tool_calls))))
      return false;
    if (!write(sink, sse_event(finish_chunk(r.meta, index, u.finish, take_logprobs(r, c)))))
      return false;
  }
  if (!all_done(r)) return true;
  if (r.meta.include_usage && !write(sink, sse_event(usage_chunk(r.meta, r.usage)))) return false;
  if (!write(sink, "data: [DONE]\n\n")) return false;
  sink.done();
  return true;
}

// A whole answer is gathered in the handler, so that its status tells how generation ended (a
// failure is a 500, not a 200 with an error inside). The client's connection is watched meanwhile:
// one that closes cancels the jobs (the caller does), as does the server stopping.
void answer_whole(Relay& r, httplib::Response& res, const httplib::Server& svr) {
  const SocketStream* conn = current_stream();
  while (!all_done(r)) {
    if (conn != nullptr && !conn->is_writable()) return;
    if (!svr.is_running())
      return send_error(res, 503, "the server is shutting down", "server_error", "");
    for (size_t i = 0; i < r.choices.size(); ++i) {
      ChoiceRelay& c = r.choices[i];
      if (c.done) continue;
      JobUpdate u;
      const bool ended = take_choice(r, i, choice_poll(r), u);
      for (const std::string& piece : u.pieces) {
        if (c.reasoning)
          collect(c, c.reasoning->feed(piece));
        else
          c.answer.text += piece;
      }
      if (!ended) continue;
      if (c.reasoning) collect(c, c.reasoning->finish());
      if (!u.error.empty()) return send_error(res, 500, u.error, "server_error", "");
      c.answer.logprobs = take_logprobs(r, c);
    }
  }
  std::vector<Choice> answers;
  for (const ChoiceRelay& c : r.choices) answers.push_back(c.answer);
  res.set_content(dump(full_response(r.meta, answers, r.usage)), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  Impl(JobRunner& s, const Tokenizer& t, std::optional<ChatTemplate> c, std::string nc,
       const ServerOptions& opt)
      : sched(s),
        tok(t),
        chat(std::move(c)),
        no_chat(std::move(nc)),
        o(opt),
        created(unix_now()),
        responses(opt.stored_responses, opt.stored_response_bytes) {}

  void routes();
  void serve_connection(int fd, std::string buffered, size_t head_bytes);
  void generate(ApiKind kind, const std::string& text, httplib::Response& res);
  // Adds the CORS headers when the request comes from an allowed origin; false otherwise.
  bool cors_headers(const httplib::Request& req, httplib::Response& res) const;
  GenerationContext gen_context() const {
    return {sched, tok, chat, no_chat, o.model_id, o.reasoning_budget, o.vision.get()};
  }
  RouteContext route_context() const {
    return {gen_context(), o.max_body_bytes, svr, o.model_info};
  }
  json model_json() const {
    return {
        {"id", o.model_id}, {"object", "model"}, {"created", created}, {"owned_by", "turbospark"}};
  }

  JobRunner& sched;
  const Tokenizer& tok;
  std::optional<ChatTemplate> chat;
  std::string no_chat;
  ServerOptions o;
  int64_t created;
  ResponseStore responses;
  // serve() has seen every worker finish (stop() waits for it up to the shutdown timeout).
  std::mutex served_mu;
  std::condition_variable served_cv;
  bool served = false;
  RequestServer svr;
  std::unique_ptr<ConnectionGate> gate;
};

bool HttpServer::Impl::cors_headers(const httplib::Request& req, httplib::Response& res) const {
  if (o.cors.empty() || !req.has_header("Origin")) return false;
  const std::string origin = req.get_header_value("Origin");
  if (o.cors != "*" && origin != o.cors) return false;
  res.set_header("Access-Control-Allow-Origin", o.cors == "*" ? "*" : origin);
  if (o.cors != "*") res.set_header("Vary", "Origin");
  if (req.method == "OPTIONS") {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers",
                   asked.empty() ? "Authorization, Content-Type" : asked);
    res.set_header("Access-Control-Max-Age", "600");
  }
  return true;
}

void HttpServer::Impl::serve_connection(int fd, std::string buffered, size_t head_bytes) {
  const size_t max_read = head_bytes + o.max_body_bytes + kFramingAllowance;
  SocketStream stream(fd, std::move(buffered), SocketStream::Clock::now() + kRequestReadTime,
                      max_read, kWriteTimeout);
  set_current_stream(&stream);
  access_begin();
  try {
    svr.serve(stream);
  } catch (const std::exception&) {
    // httplib lets a failed write of a provider's data escape; the connection is closed anyway.
  }
  set_current_stream(nullptr);
  const std::string line = access_end(o.log_format);
  if (!line.empty()) std::fputs(line.c_str(), stderr);
}

void HttpServer::Impl::generate(ApiKind kind, const std::string& text, httplib::Response& res) {
  json body;
  try {
    body = parse_json_bounded(text, "the request body");
  } catch (const Error& e) {
    return bad_request(res, e.what());
  }
  if (!body.is_object()) return bad_request(res, "the request body must be a JSON object");
  ResponseMeta meta;
  bool stream = false;
  bool logprobs = false;
  size_t per_prompt = 1;
  Generation gen;
  try {
    const ApiRequest a = parse_api_request(kind, body);
    gen = start_generation(gen_context(), a);
    logprobs = a.top_logprobs >= 0;
    per_prompt = static_cast<size_t>(a.n);
    meta = ResponseMeta{kind, new_response_id(kind), o.model_id, unix_now(),
                        a.stream && a.include_usage};
    meta.split_reasoning = gen.split_reasoning;
    meta.thinking_open = gen.thinking_open;
    stream = a.stream;
  } catch (const Error& e) {
    return bad_request(res, e.what());
  } catch (const RouteError& e) {
    return send_error(res, e.status, e.message, e.type, e.code);
  }
  auto relay = std::make_shared<Relay>();
  const auto cancel_all = [relay] {
    for (ChoiceRelay& c : relay->choices) c.job->cancel();
  };
  for (auto& job : gen.jobs) relay->choices.emplace_back().job = std::move(job);
  relay->meta = std::move(meta);
  for (ChoiceRelay& c : relay->choices) c.reasoning = answer_splitter(gen);
  relay->tok = &tok;
  relay->logprobs = logprobs;
  relay->per_prompt = per_prompt;
  if (!stream) {
    answer_whole(*relay, res, svr);
    return cancel_all();  // a no-op unless the client left or a choice failed
  }
  const auto release = [cancel_all](bool) { cancel_all(); };
  const auto guarded = [relay](size_t, httplib::DataSink& sink) {
    // httplib calls providers outside its handler try-block: nothing may escape.
    try {
      return relay_stream(*relay, sink);
    } catch (const std::exception&) {
      return false;
    }
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", guarded, release);
}

void HttpServer::Impl::routes() {
  svr.set_payload_max_length(o.max_body_bytes);
  GateOptions g;
  g.limits.max_body_bytes = o.max_body_bytes;
  g.request_workers = request_workers(o.http_threads, sched.options());
  gate = std::make_unique<ConnectionGate>(
      g,
      [this](int fd, std::string buffered, size_t head_bytes) {
        serve_connection(fd, std::move(buffered), head_bytes);
      },
      refusal_text);

  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    access_response(req.method, req.path, res.status);
  });
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // CORS first: a browser reads no answer, not even a 401, without it, and sends its preflight
    // without the API key.
    if (cors_headers(req, res) && req.method == "OPTIONS") {
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    // The chat page itself needs no key: it asks for one, and its requests carry it.
    const bool page = req.path == "/" && (req.method == "GET" || req.method == "HEAD");
    if (o.api_key.empty() || req.path == "/health" || page)
      return httplib::Server::HandlerResponse::Unhandled;
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + o.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.path.starts_with("/api/"))
      ollama_error(res, 401,
                   "invalid or missing API key (send the header 'Authorization: Bearer KEY')");
    else
      send_error(res, 401,
                 "invalid or missing API key (send the header 'Authorization: Bearer KEY')",
                 "invalid_request_error", "invalid_api_key");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (unknown route, body too large, malformed HTTP) arrive here bodiless.
  svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404 && req.path.starts_with("/api/")) {
      ollama_error(res, 404, "unknown route: " + req.method + " " + req.path);
    } else if (res.status == 404) {
      send_error(res, 404, "unknown route: " + req.method + " " + req.path, "invalid_request_error",
                 "unknown_url");
    } else if (res.status == 413) {
      send_error(res, 413,
                 "the request body is larger than the limit of " +
                     std::to_string(o.max_body_bytes) + " bytes",
                 "invalid_request_error", "request_too_large");
    } else {
      const auto [type, code] = error_kind(res.status);
      send_error(res, res.status, "HTTP error " + std::to_string(res.status), type, code);
    }
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          message += std::string(": ") + e.what();
        } catch (...) {
        }
        send_error(res, 500, message, "server_error", "");
      });

  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerStats s = sched.stats();
    if (!s.model_failure.empty()) {
      res.status = 503;
      return res.set_content(dump(json{{"status", "failed"}, {"error", s.model_failure}}),
                             "application/json");
    }
    const json j = {{"status", "ok"},
                    {"slots_total", s.slots_total},
                    {"slots_free", s.slots_total - s.slots_busy},
                    {"queued", s.queued},
                    {"steps", s.steps},
                    {"decode_rows", s.decode_rows},
                    {"prefill_rows", s.prefill_rows},
                    {"cached_rows", s.cached_rows}};
    res.set_content(dump(j), "application/json");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy", kChatPagePolicy);
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(sched.stats()), "text/plain; version=0.0.4");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({model_json()})}}),
                    "application/json");
  });
  svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != o.model_id)
      return send_error(res, 404, "the model '" + std::string(req.matches[1]) + "' does not exist",
                        "invalid_request_error", "model_not_found");
    res.set_content(dump(model_json()), "application/json");
  });
  for (const auto& [path, answer] :
       {std::pair{"/tokenize", &tokenize_response}, {"/detokenize", &detokenize_response}})
    svr.Post(path, [this, answer](const httplib::Request&, httplib::Response& res,
                                  const httplib::ContentReader& reader) {
      std::string text;
      if (!read_body(reader, o.max_body_bytes, text, res)) return;
      try {
        const json body = parse_json_bounded(text, "the request body");
        if (!body.is_object()) return bad_request(res, "the request body must be a JSON object");
        res.set_content(dump(answer(tok, body)), "application/json");
      } catch (const Error& e) {
        bad_request(res, e.what());
      }
    });
  add_ollama_routes(svr, route_context());
  add_embedding_routes(svr, route_context());
  add_responses_routes(svr, route_context(), responses);
  for (const auto& [path, kind] :
       {std::pair{"/v1/completions", ApiKind::Completion}, {"/v1/chat/completions", ApiKind::Chat}})
    svr.Post(path, [this, kind](const httplib::Request&, httplib::Response& res,
                                const httplib::ContentReader& reader) {
      std::string text;
      if (read_body(reader, o.max_body_bytes, text, res)) generate(kind, text, res);
    });
}

HttpServer::HttpServer(JobRunner& scheduler, const Tokenizer& tokenizer,
                       std::optional<ChatTemplate> chat, std::string no_chat,
                       const ServerOptions& options)
    : impl_(std::make_unique<Impl>(scheduler, tokenizer, std::move(chat), std::move(no_chat),
                                   options)) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const ServerOptions& o = impl_->o;
  const int port = impl_->gate->bind(o.host, o.port);
  if (port >= 0) impl_->svr.start_idle_loop();
  if (port < 0)
    fail(ErrorKind::Usage,
         "cannot listen on " + o.host + ":" + std::to_string(o.port) +
             " (the port is in use, or the host is not an address of this machine)");
  return port;
}

bool HttpServer::serve() {
  const bool ok = impl_->gate->run();
  {
    std::lock_guard lock(impl_->served_mu);
    impl_->served = true;
  }
  impl_->served_cv.notify_all();
  impl_->svr.stop_idle_loop();
  return ok;
}

void HttpServer::stop() {
  // No new connections; gate->run() returns once every worker is done.
  impl_->gate->stop();
  {
    const auto timeout = std::chrono::duration<double>(impl_->o.shutdown_timeout_s);
    std::unique_lock lock(impl_->served_mu);
    impl_->served_cv.wait_for(lock, timeout, [this] { return impl_->served; });
  }
  // Ends the streams and waits still in progress, so that serve() returns without waiting for
  // them (their jobs are cancelled as their clients would be).
  impl_->svr.stop_idle_loop();
}

}  // namespace ts::server

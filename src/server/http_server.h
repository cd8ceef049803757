// The HTTP front (cpp-httplib): the web chat page at GET / (server/chat_page.h), GET /health, GET
// /v1/models[/ID], POST /v1/completions and POST /v1/chat/completions, plain or streamed as
// server-sent events, Ollama's /api/* routes (server/ollama_api.h), the embedding routes
// (server/embeddings_api.h), OpenAI's /v1/responses
// (server/responses_api.h), llama.cpp's POST /tokenize and /detokenize (server/tokenize_api.h), and
// GET /metrics (the scheduler's counters for Prometheus). A connection gate
// (server/connection_gate.h) reads and judges every request head before a worker sees it; workers
// then run httplib's parsing and routing on the connection. Handlers parse, tokenize and queue
// requests, then relay what the scheduler produces; they never touch the engine. Every failure is
// an OpenAI-style JSON error with its status. The limits and status codes are listed in
// docs/SERVER.md.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "server/access_log.h"
#include "server/image_prompt.h"
#include "server/job_runner.h"
#include "server/model_info.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port
  std::string api_key;  // empty: no authentication
  std::string model_id;
  size_t max_body_bytes = 4u << 20;
  int http_threads = 0;  // requests in progress; 0: every slot and queue place, plus a few
  ModelInfo model_info;  // for the routes that describe the model (Ollama's tags and show)
  // /v1/responses kept in memory for previous_response_id: the newest this many, in at most
  // this many bytes (docs/SERVER.md).
  size_t stored_responses = 256;
  size_t stored_response_bytes = 64u << 20;
  // CORS: the origin browsers may call from ("*": any); empty: no CORS headers.
  std::string cors;
  LogFormat log_format = LogFormat::Text;  // the access log on stderr
  // On stop(): how long requests in progress may take to finish before their streams are ended.
  double shutdown_timeout_s = 10;
  // --reasoning-budget: a chat request's default (-1: none).
  int64_t reasoning_budget = -1;
  // Chat image_url parts go through this (null: such requests are refused).
  std::shared_ptr<VisionService> vision;
};

class HttpServer {
 public:
  // `chat` is empty when the model has no chat format; chat requests then fail with `no_chat`.
  HttpServer(JobRunner& scheduler, const Tokenizer& tokenizer, std::optional<ChatTemplate> chat,
             std::string no_chat, const ServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address and returns the port (a Usage error when it cannot be bound).
  int bind();
  // Serves until stop(); returns false when the listening socket failed.
  bool serve();
  // Stops accepting connections, lets the requests in progress finish for up to the shutdown
  // timeout, then ends the ones left. Safe from any thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::server

// `turbospark serve [-m MODEL] [--host H] [--port P] [--api-key KEY] [--parallel N] [-c CTX]`:
// an OpenAI-compatible HTTP server. -c is the context of each of the --parallel slots; their KV
// caches are allocated at start. SIGINT / SIGTERM stop it cleanly: no new connections, the
// requests in progress finish within --shutdown-timeout, then the rest are ended. An encoder model
// (BERT) serves embeddings only, through an EncoderScheduler: --parallel texts a pass.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/image_flags.h"
#include "cli/model_flags.h"
#include "cli/number_checks.h"
#include "cli/serve_memory.h"
#include "core/error.h"
#include "model/family.h"
#include "model/model_spec.h"
#include "runtime/encoder.h"
#include "runtime/model_tokenizer.h"
#include "runtime/prompt_lookup.h"
#include "server/chat_prompt.h"
#include "server/encoder_scheduler.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "text/reasoning_budget.h"
#include "vision/vision_tower.h"

namespace ts::cli {
namespace {

struct ServeArgs {
  ModelFlags model;
  ImageFlags images;
  bool allow_image_urls = false;
  server::ServerOptions http;
  int parallel = 4;
  size_t queue = 64;
  int64_t lookup = 0;
  int64_t checkpoint_every = 0;
  std::string chat_template;
  std::string alias;
  std::string max_body = "4M";
  std::string log_format = "text";
};

// The name clients use in "model": the file's stem, or the directory's name.
std::string default_model_id(const std::string& path) {
  std::filesystem::path p(path);
  if (p.filename().empty()) p = p.parent_path();
  return p.has_extension() ? p.stem().string() : p.filename().string();
}

// What /api/tags and /api/show tell about the model: its family, format, size and age.
server::ModelInfo model_info(const ArchConfig& cfg, SourceKind kind, const std::string& path,
                             int64_t slot_ctx) {
  namespace fs = std::filesystem;
  server::ModelInfo m;
  m.family = family_name(cfg.family);
  m.format = kind == SourceKind::Gguf ? "gguf" : "safetensors";
  m.trained_context = cfg.ctx_train;
  m.slot_context = slot_ctx;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) m.size_bytes += e.file_size(ec);
  } else {
    m.size_bytes = fs::file_size(path, ec);
  }
  const auto written = fs::last_write_time(path, ec);
  if (!ec)
    m.modified_unix = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::file_clock::to_sys(written).time_since_epoch())
                          .count();
  return m;
}

// Serves `runner` until SIGINT / SIGTERM (blocked in `stop_signals`); `capacity` describes its
// capacity in the start line.
int serve_until_stopped(ServeArgs& a, server::JobRunner& runner, const Tokenizer& tok,
                        const std::optional<ChatTemplate>& chat, const std::string& no_chat,
                        const std::string& capacity, sigset_t& stop_signals) {
  a.http.max_body_bytes = parse_bytes(a.max_body, "--max-body");
  a.http.log_format = server::parse_log_format(a.log_format);
  server::HttpServer http(runner, tok, chat, no_chat, a.http);
  const int port = http.bind();
  std::fprintf(stderr, "turbospark: serving '%s' on http://%s:%d | %s, queue %zu, chat %s\n",
               a.http.model_id.c_str(), a.http.host.c_str(), port, capacity.c_str(), a.queue,
               chat ? chat->describe().c_str() : "off");
  std::fflush(stderr);

  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    http.stop();
  });
  const bool served = http.serve();
  // serve() also ends when the listening socket fails: wake the signal thread then.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  runner.stop();
  if (!served) fail(ErrorKind::Runtime, "the server stopped: accepting connections failed");
  std::fprintf(stderr, "turbospark: server stopped\n");
  return 0;
}

// An encoder serves embeddings: each pass takes up to --parallel texts, their tokens at most
// --prefill-batch (default: as many as --parallel whole texts may hold).
int serve_encoder(ServeArgs& a, const std::string& path, sigset_t& stop_signals) {
  const EngineOptions options = engine_options(a.model);
  const auto encoder = Encoder::open(path, options.backend, options.threads);
  const int64_t positions = encoder->cfg().encoder.n_positions;
  const int64_t rows =
      std::max(positions, options.prefill_batch > 0 ? options.prefill_batch
                                                    : positions * static_cast<int64_t>(a.parallel));
  print_encoder_serve_memory(encoder_serve_memory(*encoder, rows, options.memory_budget), stderr);
  const Tokenizer tok = load_tokenizer(encoder->source());
  server::SchedulerOptions scheduling;
  scheduling.parallel = a.parallel;
  scheduling.batch_rows = rows;
  scheduling.queue_capacity = a.queue;
  server::EncoderScheduler runner(*encoder, scheduling);
  a.http.model_id = a.alias.empty() ? default_model_id(path) : a.alias;
  a.http.model_info = model_info(encoder->cfg(), encoder->source().kind(), path, positions);
  const std::string capacity = "encoder, " + std::to_string(a.parallel) +
                               " texts a pass of at most " + std::to_string(rows) + " tokens (" +
                               std::to_string(positions) + " a text)";
  return serve_until_stopped(a, runner, tok, std::nullopt, runner.cannot_generate(), capacity,
                             stop_signals);
}

int run_serve(ServeArgs& a) {
  // One thread takes SIGINT / SIGTERM with sigwait. They are blocked before any thread starts, so
  // every thread inherits the mask and none is interrupted inside the engine or httplib.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that vanishes mid-write must not end the server

  const std::string path = model_path(a.model, true);
  if (is_encoder_model(path)) return serve_encoder(a, path, stop_signals);
  const ServeShape shape{a.parallel, a.model.ctx, a.lookup};
  const EngineOptions options = engine_options(a.model);
  auto engine = Engine::open(path, serve_engine_options(options, path, shape));
  print_footprint(engine->footprint(), stderr);
  print_serve_memory(serve_memory(*engine, shape, options.memory_budget), shape, stderr);
  const Tokenizer tok = load_tokenizer(engine->spec());
  warn_beyond_trained_context(*engine, a.model);
  // A vision model (its HF directory, or --mmproj) takes chat image_url parts.
  if (auto tower = open_vision(a.images, *engine, path, engine->options().threads, false)) {
    auto v = std::make_shared<server::VisionService>();
    const ImageTokens t = image_tokens(a.images, path, &tok, tower->block_margin());
    if (t.start < 0 || t.end < 0)
      fail(ErrorKind::Usage, path + ": the model's vision start / end tokens were not found");
    v->layout = image_layout(*tower, engine->cfg());
    v->margin = tower->block_margin();
    v->tower = std::move(tower);
    v->image = t.image;
    v->start = t.start;
    v->end = t.end;
    v->width = engine->cfg().n_embd;
    v->n_deepstack = engine->cfg().n_deepstack;
    v->allow_urls = a.allow_image_urls;
    v->max_url_bytes = parse_bytes(a.max_body, "--max-body");
    a.http.vision = std::move(v);
  }
  // The bundled model is a base model with no chat format: it talks in plain text, as in `chat`.
  const std::string format =
      a.chat_template.empty() && a.model.model.empty() ? "raw" : a.chat_template;
  std::optional<ChatTemplate> chat;
  std::string no_chat;
  try {
    chat = model_chat_template(engine->spec(), tok, format);
  } catch (const Error& e) {
    if (!format.empty()) throw;
    no_chat = std::string("chat completions are off: ") + e.what();
    std::fprintf(stderr, "turbospark: %s\n", no_chat.c_str());
  }

  server::SchedulerOptions scheduling{a.parallel, a.model.ctx, engine->options().prefill_batch,
                                      a.queue,    a.lookup,    a.checkpoint_every};
  if (chat) {
    scheduling.shown_tokens = server::chat_shown_tokens(*chat, tok);
    scheduling.reasoning = reasoning_markers(*chat, tok);
  }
  server::Scheduler scheduler(*engine, tok, scheduling);
  a.http.model_id = a.alias.empty() ? default_model_id(path) : a.alias;
  a.http.model_info = model_info(engine->cfg(), engine->spec().source->kind(), path, a.model.ctx);
  char capacity[160];
  std::snprintf(capacity, sizeof capacity, "%d slots x %lld tokens (KV %.1f MiB)", a.parallel,
                static_cast<long long>(a.model.ctx),
                static_cast<double>(scheduler.kv_bytes()) / (1 << 20));
  return serve_until_stopped(a, scheduler, tok, chat, no_chat, capacity, stop_signals);
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto* sub = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  auto a = std::make_shared<ServeArgs>();
  add_model_flags(sub, a->model, true);
  add_image_flags(sub, a->images, false);
  sub->add_flag("--allow-image-urls", a->allow_image_urls,
                "Fetch http(s) image URLs of chat requests (by default only data: URLs are taken)");
  sub->add_option("--host", a->http.host, "Address to listen on (default: loopback only)");
  sub->add_option("--port", a->http.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", a->http.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health");
  sub->add_option("--parallel", a->parallel,
                  "Sequences generated at once, each with its own KV cache of -c tokens (an "
                  "encoder model: texts encoded in one pass)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--queue", a->queue,
                  "Requests that may wait for a slot before the server answers 503")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--lookup", a->lookup,
                  "Prompt lookup decoding: guess up to N tokens a step for each generating slot "
                  "from its prompt and answer so far, checked in the same forward pass (0: off)")
      ->check(CLI::Range(int64_t{0}, kMaxLookup));
  sub->add_option("--checkpoint-every", a->checkpoint_every,
                  "Hybrid models: checkpoint a slot's recurrent state every N prompt tokens, so "
                  "that prompts sharing a prefix resume from it (0: only where prompts and "
                  "answers end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  sub->add_option(
      "--chat-template", a->chat_template,
      "Chat template: a FILE.jinja, or a built-in format: chatml, llama3, llama2, mistral, gemma, "
      "raw (default: the model's own template)");
  sub->add_option("--alias", a->alias,
                  "Model name announced by /v1/models (default: the file's name)");
  sub->add_option("--max-body", a->max_body, "Largest request body (e.g. 4M); larger ones get 413");
  sub->add_option("--reasoning-budget", a->http.reasoning_budget,
                  "A thinking model's reasoning ends after N tokens (its end marker is forced); "
                  "-1: no limit. A request's \"reasoning_budget\" overrides it")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  sub->add_option("--cors", a->http.cors,
                  "Let web pages from ORIGIN call the server (CORS headers, preflight OPTIONS); "
                  "\"*\": any origin (default: none)");
  sub->add_option("--log-format", a->log_format,
                  "The access log on stderr, a line per request: text, json or off")
      ->check(CLI::IsMember({"text", "json", "off"}));
  sub->add_option("--shutdown-timeout", a->http.shutdown_timeout_s,
                  "Seconds the requests in progress may take to finish after SIGTERM / SIGINT "
                  "before their streams are ended (default 10)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--store-responses", a->http.stored_responses,
                  "Responses /v1/responses keeps for previous_response_id (the newest N, at most "
                  "64 MiB; 0: none)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  sub->add_option("--http-threads", a->http.http_threads,
                  "Requests in progress at once, each on a worker thread; more get 503 "
                  "(0: --parallel + --queue + 8)")
      ->check(at_least(0));
  return [a] { return run_serve(*a); };
}

}  // namespace ts::cli

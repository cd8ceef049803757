// The path every generating route shares (OpenAI's completions and chat completions, Ollama's
// /api/generate and /api/chat, OpenAI's /v1/responses): a checked ApiRequest becomes a prompt and
// a GenRequest, its jobs are queued (one per choice: all of them or none), and an answer is read
// back with the model's thinking split from its reply. Each route only translates its dialect to
// an ApiRequest and the answer back to its dialect.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_request.h"
#include "server/image_prompt.h"
#include "server/job.h"
#include "server/job_runner.h"
#include "text/chat_template.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"

namespace ts::server {

// What the generating routes need from the server.
struct GenerationContext {
  JobRunner& sched;
  const Tokenizer& tok;
  const std::optional<ChatTemplate>& chat;
  const std::string& no_chat;  // why chat is off, when `chat` is empty
  const std::string& model_id;
  int64_t reasoning_budget = -1;    // --reasoning-budget: a chat request's default (-1: none)
  VisionService* vision = nullptr;  // takes chat image_url parts; null: they are refused
};

// A request refused before any job runs; each route writes it in its own error shape.
struct RouteError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;  // "" when none
};

// The jobs of one request, queued.
struct Generation {
  std::vector<std::shared_ptr<Job>> jobs;  // one per choice, in index order
  bool split_reasoning = false;            // a chat answer of a thinking model
  bool thinking_open = false;              // ... whose prompt already opened <think>
  bool harmony = false;                    // ... split by gpt-oss's channels (text/harmony.h)
  std::string channel;                     // ... the one its prompt leaves the model in
  int64_t prompt_tokens = 0;
  void cancel_all() const {
    for (const auto& j : jobs) j->cancel();
  }
};

// A fresh seed for a request that names none.
uint64_t random_seed();

// The prompt's tokens: a chat request's messages through the model's template (an Input error
// when the model has none), or a completion's text or ids. `thinking_open`: whether the prompt
// leaves the model inside a <think> block; `channel`: the harmony channel it leaves it in. A chat
// request's images (image_url parts) set `images`' image rows (an Input error without it).
std::vector<int32_t> request_prompt(const GenerationContext& ctx, const ApiRequest& a,
                                    bool& thinking_open, std::string* channel = nullptr,
                                    GenRequest* images = nullptr);

// The splitter of a chat answer's reasoning from its reply (null when the model does not think):
// <think> blocks, or gpt-oss's channels.
std::unique_ptr<AnswerSplitter> answer_splitter(const Generation& gen);

// Queues `a` (its `n` choices, each with its own draws: seed + index). Throws RouteError: 404 for
// another model, 400 for a model that cannot generate or a prompt the scheduler refuses, 503 when
// the queue is full or the model failed.
Generation start_generation(const GenerationContext& ctx, const ApiRequest& a);

// One answer read from its job, its thinking split from its reply when the model thinks.
class AnswerReader {
 public:
  AnswerReader(std::shared_ptr<Job> job, const Generation& gen);

  // Waits up to `wait` for text; returns what arrived (both parts may be empty). Once done(),
  // last() holds how the answer ended.
  AnswerSplitter::Parts take(std::chrono::milliseconds wait);
  bool done() const { return done_; }
  const JobUpdate& last() const { return last_; }
  const std::shared_ptr<Job>& job() const { return job_; }
  // Microseconds from construction to the first text, and to the end (0 until then).
  int64_t first_text_us() const { return first_us_; }
  int64_t end_us() const { return end_us_; }

 private:
  std::shared_ptr<Job> job_;
  std::unique_ptr<AnswerSplitter> split_;
  bool done_ = false;
  JobUpdate last_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_us_ = 0;
  int64_t end_us_ = 0;
};

}  // namespace ts::server

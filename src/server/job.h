// One generation request as the scheduler sees it, and the channel through which its text flows
// from the scheduler thread to the HTTP handler thread that waits for it. The two sides share
// nothing else: the handler never touches the engine, the scheduler never touches a socket.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "constrain/tool_calls.h"
#include "runtime/generator.h"
#include "server/logprobs.h"
#include "text/sampler.h"
#include "vision/image_rows.h"

namespace ts::server {

struct GenRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = -1;  // < 0: until the slot's context is full
  bool ignore_eos = false;
  std::vector<std::string> stop;
  SamplerParams sampling;
  std::shared_ptr<const JsonSchema> json;  // JSON mode: the answer's schema (JsonConstraint)
  int top_logprobs = -1;  // < 0: no log-probabilities; else that many alternatives per token
  // Start from a free slot's cached rows when they hold a long enough prefix of the prompt
  // (Scheduler::reusable). Off: the prompt is prefilled whole, so the answer is bit-for-bit the
  // one the request gets alone.
  bool cache_prompt = true;
  // Chat tools (null: none). Not required: the model may write a call after any text, which
  // the tool format's opening marker starts (ToolFormat::open); required: the prompt ends with
  // it, and the answer is the call.
  std::shared_ptr<const ToolSet> tools;
  bool tool_required = false;
  // A thinking model's reasoning ends after this many tokens (< 0: no limit): its end marker is
  // forced (SchedulerOptions::reasoning). `reasoning_open`: the prompt left it reasoning.
  int64_t reasoning_budget = -1;
  bool reasoning_open = false;
  // The prompt's image rows (features, 3-D positions, keys), null for text. A cached prefix is
  // taken through an image's rows only where the cache holds the same image (its key).
  std::shared_ptr<const ImageRows> images;
  int64_t first_image_row = -1;
  // An embedding: the prompt is prefilled whole (the scheduler turns cache_prompt off) and its
  // final hidden states pooled as the model declares; nothing is generated, no LM head runs.
  bool embed = false;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose rows came from the slot's cache
};

// What a waiter takes out of the channel at once.
struct JobUpdate {
  std::vector<std::string> pieces;      // text released since the last take, in order
  std::vector<TokenLogprobs> logprobs;  // of the tokens sampled since the last take
  bool done = false;
  FinishReason finish = FinishReason::Length;
  std::string error;  // non-empty: generation failed (done is then true)
  Usage usage;
  std::vector<ToolCall> tool_calls;  // with done and FinishReason::ToolCalls
  std::vector<float> embedding;      // with done, for an embedding request
};

class Job {
 public:
  explicit Job(GenRequest request) : request_(std::move(request)) {}

  const GenRequest& request() const { return request_; }

  // Waiter side. Returns what arrived within `timeout` (possibly nothing); once it has returned
  // done, later calls return done again with no pieces.
  JobUpdate take(std::chrono::milliseconds timeout);
  // The client went away: the scheduler frees the slot at its next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Scheduler side.
  void emit(std::string text);
  void record(TokenLogprobs lp);
  void finish(FinishReason reason, Usage usage, std::vector<ToolCall> calls = {});
  void finish_embedding(std::vector<float> embedding, Usage usage);
  void fail(std::string message);

 private:
  void close(FinishReason reason, Usage usage, std::string error, std::vector<ToolCall> calls);

  const GenRequest request_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> pieces_;
  std::vector<TokenLogprobs> logprobs_;
  bool done_ = false;
  FinishReason finish_ = FinishReason::Length;
  std::string error_;
  Usage usage_;
  std::vector<ToolCall> tool_calls_;
  std::vector<float> embedding_;
};

}  // namespace ts::server

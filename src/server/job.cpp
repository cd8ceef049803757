#include "server/job.h"

namespace ts::server {

JobUpdate Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pieces_.empty() || !logprobs_.empty(); });
  JobUpdate u;
  u.pieces.swap(pieces_);
  u.logprobs.swap(logprobs_);
  u.done = done_;
  u.finish = finish_;
  u.error = error_;
  u.usage = usage_;
  if (done_) u.tool_calls = tool_calls_;
  if (done_) u.embedding = embedding_;
  return u;
}

void Job::emit(std::string text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mu_);
    pieces_.push_back(std::move(text));
  }
  cv_.notify_all();
}

void Job::record(TokenLogprobs lp) {
  {
    std::lock_guard lock(mu_);
    logprobs_.push_back(std::move(lp));
  }
  cv_.notify_all();
}

void Job::finish(FinishReason reason, Usage usage, std::vector<ToolCall> calls) {
  close(reason, usage, {}, std::move(calls));
}

void Job::finish_embedding(std::vector<float> embedding, Usage usage) {
  {
    std::lock_guard lock(mu_);
    embedding_ = std::move(embedding);
  }
  close(FinishReason::Stop, usage, {}, {});
}

void Job::fail(std::string message) {
  close(FinishReason::Stop, {}, std::move(message), {});
}

void Job::close(FinishReason reason, Usage usage, std::string error, std::vector<ToolCall> calls) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    finish_ = reason;
    usage_ = usage;
    error_ = std::move(error);
    tool_calls_ = std::move(calls);
  }
  cv_.notify_all();
}

}  // namespace ts::server

#include "server/encoder_scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/family.h"

namespace ts::server {

EncoderScheduler::EncoderScheduler(const Encoder& encoder, const SchedulerOptions& options)
    : encoder_(encoder), o_(options) {
  if (o_.parallel < 1) fail(ErrorKind::Usage, "--parallel must be at least 1");
  o_.ctx = encoder_.cfg().encoder.n_positions;
  o_.batch_rows = std::max(o_.batch_rows, o_.ctx);
  // A pooling the model declares wrongly fails its embedding requests, not the server.
  try {
    embedding_ = read_embedding_spec(encoder_.source());
  } catch (const Error& e) {
    embedding_.why_none = e.what();
  }
  if (embedding_.pooling != Pooling::None) pooler_.emplace(embedding_, encoder_.cfg().n_embd);
  thread_ = std::thread([this] { loop(); });
}

EncoderScheduler::~EncoderScheduler() {
  stop();
}

std::string EncoderScheduler::cannot_generate() const {
  return std::string("model is an embedding encoder; it cannot generate (") +
         family_name(encoder_.cfg().family) + ": use /v1/embeddings or /api/embed)";
}

std::shared_ptr<Job> EncoderScheduler::submit(GenRequest request) {
  if (!request.embed) fail(ErrorKind::Input, cannot_generate());
  if (!pooler_) fail(ErrorKind::Input, embedding_.why_none);
  encoder_.check(request.prompt);
  auto job = std::make_shared<Job>(std::move(request));
  {
    std::lock_guard lock(mu_);
    if (stopping_) fail(ErrorKind::Runtime, "the server is shutting down");
    std::erase_if(queue_, [](const std::shared_ptr<Job>& j) { return j->cancelled(); });
    // The texts the next pass takes do not count against the queue's capacity.
    const size_t free_texts = static_cast<size_t>(o_.parallel - busy_.load());
    if (queue_.size() >= o_.queue_capacity + free_texts) return nullptr;
    queue_.push_back(job);
  }
  cv_.notify_one();
  return job;
}

SchedulerStats EncoderScheduler::stats() {
  SchedulerStats st;
  {
    std::lock_guard lock(mu_);
    std::erase_if(queue_, [](const std::shared_ptr<Job>& j) { return j->cancelled(); });
    st.queued = queue_.size();
  }
  st.slots_total = o_.parallel;
  st.slots_busy = busy_.load();
  st.steps = steps_.load();
  st.prefill_rows = rows_.load();
  return st;
}

void EncoderScheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (const auto& j : queue_) j->fail("the server is shutting down");
  queue_.clear();
}

std::vector<std::shared_ptr<Job>> EncoderScheduler::take_pass_locked() {
  std::vector<std::shared_ptr<Job>> pass;
  int64_t rows = 0;
  while (!queue_.empty() && pass.size() < static_cast<size_t>(o_.parallel)) {
    const std::shared_ptr<Job>& j = queue_.front();
    if (!j->cancelled()) {
      const auto n = static_cast<int64_t>(j->request().prompt.size());
      if (!pass.empty() && rows + n > o_.batch_rows) break;
      rows += n;
      pass.push_back(j);
    }
    queue_.pop_front();
  }
  return pass;
}

void EncoderScheduler::run_pass(const std::vector<std::shared_ptr<Job>>& pass) {
  std::vector<std::vector<int32_t>> texts;
  texts.reserve(pass.size());
  uint64_t rows = 0;
  for (const auto& j : pass) {
    texts.push_back(j->request().prompt);
    rows += texts.back().size();
  }
  std::vector<std::vector<float>> vectors;
  std::string error;
  try {
    vectors = encoder_.embed(texts, *pooler_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // The counters first: a client that has its answer sees them count its pass.
  steps_.fetch_add(1);
  rows_.fetch_add(rows);
  busy_.store(0);
  for (size_t i = 0; i < pass.size(); ++i) {
    if (!error.empty())
      pass[i]->fail(error);
    else
      pass[i]->finish_embedding(std::move(vectors[i]),
                                Usage{static_cast<int64_t>(texts[i].size()), 0, 0});
  }
}

void EncoderScheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> pass;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      pass = take_pass_locked();
      busy_.store(static_cast<int>(pass.size()));
    }
    if (!pass.empty()) run_pass(pass);
  }
}

}  // namespace ts::server

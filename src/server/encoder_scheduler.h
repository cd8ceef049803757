// The scheduler of an encoder model (a BERT embedding model, runtime/encoder.h): one thread owns
// the encoder and runs every pass. Embedding jobs wait in a bounded FIFO; each pass takes the
// oldest of them, up to `parallel` texts of at most `batch_rows` tokens together (the first text
// whatever its length), and encodes them at once, so that the texts of one request, and of
// requests that arrive together, share the passes' weight reads. A request to generate is refused
// when it is submitted: an encoder cannot.
//
// The counters are the decoder scheduler's words for this: a slot is a text of the running pass,
// a step a pass, a prefill row a token encoded. options().ctx is the encoder's positions, the
// longest text it takes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/embedding.h"
#include "runtime/encoder.h"
#include "server/job_runner.h"

namespace ts::server {

class EncoderScheduler : public JobRunner {
 public:
  // Uses `options`' parallel, batch_rows (raised to the encoder's positions) and queue_capacity;
  // starts the thread.
  EncoderScheduler(const Encoder& encoder, const SchedulerOptions& options);
  ~EncoderScheduler() override;
  EncoderScheduler(const EncoderScheduler&) = delete;
  EncoderScheduler& operator=(const EncoderScheduler&) = delete;

  std::shared_ptr<Job> submit(GenRequest request) override;
  SchedulerStats stats() override;
  const SchedulerOptions& options() const override { return o_; }
  const EmbeddingSpec& embedding() const override { return embedding_; }
  int64_t embedding_size() const override { return encoder_.cfg().n_embd; }
  // A pass's texts and the next pass's: while one pass runs, the next one's wait queued, so
  // passes stay full rather than alternating with the few refilled since the last.
  size_t embedding_window() const override { return 2 * static_cast<size_t>(o_.parallel); }
  std::string cannot_generate() const override;
  void stop() override;

 private:
  void loop();
  // The oldest waiting jobs that fit one pass (none cancelled); called under mu_.
  std::vector<std::shared_ptr<Job>> take_pass_locked();
  void run_pass(const std::vector<std::shared_ptr<Job>>& pass);

  const Encoder& encoder_;
  SchedulerOptions o_;
  EmbeddingSpec embedding_;
  std::optional<Pooler> pooler_;  // where the model pools

  std::mutex mu_;  // guards queue_, stopping_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> steps_{0}, rows_{0};
  std::thread thread_;
};

}  // namespace ts::server

// What the HTTP routes queue their jobs with, whatever runs them: the decoder's Scheduler
// (server/scheduler.h: generation and embeddings, in KV slots) or the EncoderScheduler
// (server/encoder_scheduler.h: embeddings only, a BERT encoder's batches). The routes see only
// this; the counters and options are the scheduler's words, each runner saying what they count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/pooling.h"
#include "server/job.h"
#include "text/reasoning_budget.h"

namespace ts::server {

struct SchedulerOptions {
  int parallel = 4;            // slots
  int64_t ctx = 4096;          // KV cache rows per slot
  int64_t batch_rows = 64;     // most rows of one forward pass (raised to `parallel` if lower)
  size_t queue_capacity = 64;  // requests waiting for a slot
  int64_t lookup = 0;          // prompt lookup decoding: guessed tokens per slot and step
  // Models with recurrent (DeltaNet) layers: besides where each prompt and answer ends, the state
  // is checkpointed every this many prompt tokens (0: only there), so that a later prompt sharing
  // a prefix can resume from it.
  int64_t checkpoint_every = 0;
  // Control tokens shown as their text in answers: the chat template's tool-call and channel
  // markers (ToolFormat::preserved_tokens), so that calls and channels can be read.
  std::vector<int32_t> shown_tokens = {};
  // The model's reasoning markers, for requests with a reasoning budget (none: no budget holds).
  ReasoningMarkers reasoning = {};
};

struct SchedulerStats {
  int slots_total = 0;
  int slots_busy = 0;
  size_t queued = 0;
  uint64_t steps = 0;          // forward passes
  uint64_t decode_rows = 0;    // rows of running sequences: each one's last token, its guesses
  uint64_t prefill_rows = 0;   // rows that were prompt tokens
  uint64_t cached_rows = 0;    // prompt tokens taken from a slot's cache instead of prefilled
  uint64_t drafted = 0;        // tokens guessed by prompt lookup (decode rows beyond one a slot)
  uint64_t draft_matched = 0;  // ... that were the tokens sampled
  std::string model_failure;   // non-empty: the model's files changed, nothing is served
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;

  // Queues a request; nullptr when the queue is full. An Input error for a request the model
  // cannot take (the prompt empty, too long, an id outside the vocabulary; an embedding when the
  // model declares no pooling; a generation when it cannot generate).
  virtual std::shared_ptr<Job> submit(GenRequest request) = 0;
  virtual SchedulerStats stats() = 0;
  virtual const SchedulerOptions& options() const = 0;
  // How embedding requests are pooled (Pooling::None and why_none: they are refused), and the
  // size of their vectors.
  virtual const EmbeddingSpec& embedding() const = 0;
  virtual int64_t embedding_size() const = 0;
  // The most jobs of one embedding request queued at once: enough to keep the runner busy, few
  // enough that a large batch neither fills the queue (a 503 for others) nor waits behind it.
  virtual size_t embedding_window() const { return static_cast<size_t>(options().parallel); }
  // Empty when the model generates; else why it cannot, which generation routes answer with.
  virtual std::string cannot_generate() const = 0;
  // Fails every queued and running job and joins the thread; the destructors call it.
  virtual void stop() = 0;
};

}  // namespace ts::server

// The scheduler: one thread owns the engine and runs every forward pass. Up to `parallel`
// sequences (slots) generate at once, each with its own KV cache (allocated once, `ctx` rows) and
// sampler. Every step is ONE forward pass over one decode row of each generating slot plus a
// chunk of a waiting prompt, so a long prompt is prefilled a piece at a time between decode steps
// and the running streams keep flowing. Requests beyond the slots wait in a bounded FIFO.
//
// With prompt lookup decoding (`lookup` > 0), a generating slot's row is followed in the same pass
// by up to `lookup` tokens guessed from its prompt and answer (runtime/prompt_lookup.h); the
// sampled tokens that match take the next rows' logits, and the rows after the first mismatch are
// dropped.
//
// A finished request leaves its rows in its slot: the next request whose prompt starts with them
// (a chat client resending the conversation, the same prompt again) goes to that slot and
// prefills only what is new. The logits after each prompt are kept too, so a repeated prompt
// needs no forward pass and gets exactly the first answer's bits. Rows another slot holds (busy
// or not) are copied into the free slot when they cover more of the prompt than its own, and a
// request whose prompt another slot is prefilling waits for those rows (the `n` choices of one
// request: one prefill, then copies).
//
// An embedding request (GenRequest::embed) takes a slot like any other: its prompt is prefilled
// in the same passes, its final hidden states handed back instead of logits and pooled
// (runtime/embedding.h), and the slot is free again once the prompt is in.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "constrain/json_constraint.h"
#include "core/mapped_file.h"
#include "model/pooling.h"
#include "runtime/embedding.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/sequence_decoder.h"
#include "server/job.h"
#include "server/job_runner.h"
#include "text/reasoning_budget.h"
#include "text/tokenizer.h"

namespace ts::server {

class Scheduler : public JobRunner {
 public:
  // Allocates the slots' KV caches and the forward buffers, then starts the thread.
  Scheduler(Engine& engine, const Tokenizer& tokenizer, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::shared_ptr<Job> submit(GenRequest request) override;
  SchedulerStats stats() override;
  const SchedulerOptions& options() const override { return o_; }
  const EmbeddingSpec& embedding() const override { return embedding_; }
  int64_t embedding_size() const override { return engine_.cfg().n_embd; }
  std::string cannot_generate() const override { return {}; }
  uint64_t kv_bytes() const;  // every slot's KV cache
  void stop() override;

 private:
  struct Slot {
    std::unique_ptr<KvCache> kv;
    std::vector<float> logits;           // [1 + lookup][vocab]: a row per token of the step's pass
    std::shared_ptr<Job> job;            // null: free
    std::optional<SequenceDecoder> dec;  // the answer's tokens: sampled, checked, released
    int64_t fed = 0;                     // prompt tokens in the cache
    int64_t cached = 0;                  // of which were there before the job came
    std::vector<int32_t> pass;  // the step's decode rows: the last sampled token, then guesses
    // Recurrent models: rows a rejected guess took back with the state, fed again before `next`
    // (in a pass without guesses; pass_first is the row of `next` in the pass).
    std::vector<int32_t> replay;
    size_t pass_first = 0;
    bool sample_first = false;  // the prompt's logits came from the cache: sample now
    uint64_t admitted = 0;      // admission order: the oldest prompt is prefilled first, and the
                                // least recently admitted free slot is given away first
    // What the cache holds, kept after the job ends: the token of every row (kv->n_past of them),
    // and the logits after the first `prompt_logits_rows` of them when those were a whole prompt.
    std::vector<int32_t> tokens;
    std::shared_ptr<const ImageRows> images;  // the keys of those rows that hold an image
    std::vector<float> prompt_logits;
    int64_t prompt_logits_rows = 0;
    std::optional<Pooler> pooler;  // an embedding job's
  };

  void loop();
  void admit_locked();
  // Rows of `s`'s cache that request `r` would keep; 0 when too few to be worth the slot.
  int64_t reusable(const Slot& s, const GenRequest& r) const;
  // Where request `r` goes: a free slot (null when none is free), how many rows of the prompt it
  // starts with, and the slot they are copied from (null: the slot's own).
  struct Placement {
    Slot* slot = nullptr;
    int64_t kept = 0;
    const Slot* from = nullptr;
  };
  Placement pick_slot(const GenRequest& r);
  // Whether a slot is prefilling more of `r`'s prompt than the `kept` rows it could start with now.
  bool shares_a_prefill(const GenRequest& r, int64_t kept) const;
  void start(const Placement& p, std::shared_ptr<Job> job);
  // Samples from the rows of the slot's logits fed with `pass` (row `first` first) while the
  // token sampled is the next row's guess; records, emits and finishes as the decoder says.
  // Returns the last row used.
  size_t sample(Slot& s, std::span<const int32_t> pass, size_t first);
  void step();
  // The slot's decode rows of the step: next and its guesses (none while the slot prefills, or
  // when `budget` rows are all the step has left), or the rows to feed again and next. False when
  // the slot failed (its job is failed and released).
  bool decode_pass(Slot& s, int64_t budget);
  // Feeds the slot's rows to feed again in passes of their own; false (the job failed) on error.
  bool feed_replay(Slot& s);
  // Samples from each row of the pass until a sampled token is not the next guess (or the answer
  // ends), then forgets the rows after it.
  void verify_pass(Slot& s);
  void finish(Slot& s);                   // the decoder has finished: the job gets its end
  void finish_embedding(Slot& s);         // the prompt is in: the job gets its pooled vector
  std::shared_ptr<Job> release(Slot& s);  // frees the slot; returns its job
  void forget_cache(Slot& s);
  bool prefilling(const Slot& s) const;

  Engine& engine_;
  const Tokenizer& tok_;
  SchedulerOptions o_;
  // The vocabulary's pieces for JSON mode and tool calls, made once, by the handler thread that
  // submits the first such request (a sort of the whole vocabulary, DESIGN-NOTES "JSON mode": not
  // under mu_, not on the scheduler thread); the queue's mutex orders it before the scheduler
  // reads it.
  std::once_flag json_vocab_once_;
  std::shared_ptr<const JsonVocabulary> json_vocab_;
  Forward forward_;
  std::vector<Slot> slots_;
  std::vector<SeqChunk> chunks_;
  std::vector<Slot*> chunk_slots_;
  // How the model pools (why_none: why it cannot), and the pass's hidden rows of embedding jobs,
  // [max_rows][n_embd] (only where the model pools).
  EmbeddingSpec embedding_;
  std::vector<float> hidden_rows_;
  uint64_t admissions_ = 0;

  // After each forward pass: whether a file the weights come from was rewritten since it was
  // opened. Then the pass's rows are not the model's: every job fails, and so does every later
  // request (model_failure_).
  bool model_changed();
  std::vector<const MappedFile*> model_files_;
  std::string model_failure_;  // guarded by mu_

  std::mutex mu_;  // guards queue_, stopping_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> steps_{0}, decode_rows_{0}, prefill_rows_{0}, cached_rows_{0};
  std::atomic<uint64_t> drafted_{0}, draft_matched_{0};
  std::thread thread_;
};

}  // namespace ts::server

#include "server/scheduler.h"

#include <algorithm>
#include <exception>
#include <span>

#include "core/error.h"
#include "runtime/prompt_lookup.h"
#include "text/constraint_vocabulary.h"

namespace ts::server {

Scheduler::Scheduler(Engine& engine, const Tokenizer& tokenizer, const SchedulerOptions& options)
    : engine_(engine),
      tok_(tokenizer),
      o_(options),
      forward_(engine, std::max<int64_t>(options.batch_rows, options.parallel)) {
  if (o_.parallel < 1) fail(ErrorKind::Usage, "--parallel must be at least 1");
  if (o_.ctx < 1) fail(ErrorKind::Usage, "the context per slot must be at least 1");
  if (o_.lookup < 0 || o_.lookup > kMaxLookup)
    fail(ErrorKind::Usage, "--lookup must be between 0 and " + std::to_string(kMaxLookup));
  const size_t vocab = static_cast<size_t>(engine_.cfg().n_vocab);
  slots_.resize(static_cast<size_t>(o_.parallel));
  for (Slot& s : slots_) {
    s.kv = std::make_unique<KvCache>(engine_, o_.ctx);
    s.logits.resize(vocab * static_cast<size_t>(1 + o_.lookup));
    s.prompt_logits.resize(vocab);
  }
  // A pooling the model declares wrongly fails its embedding requests, not the server.
  try {
    embedding_ = read_embedding_spec(*engine_.spec().source);
  } catch (const Error& e) {
    embedding_.why_none = e.what();
  }
  if (embedding_.pooling != Pooling::None)
    hidden_rows_.resize(static_cast<size_t>(forward_.max_rows() * engine_.cfg().n_embd));
  for (const TensorRef& t : engine_.spec().source->all_tensors())
    if (std::find(model_files_.begin(), model_files_.end(), t.file) == model_files_.end())
      model_files_.push_back(t.file);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop();
}

uint64_t Scheduler::kv_bytes() const {
  uint64_t total = 0;
  for (const Slot& s : slots_) total += s.kv->bytes();
  return total;
}

std::shared_ptr<Job> Scheduler::submit(GenRequest request) {
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) fail(ErrorKind::Input, "the prompt is empty");
  if (n > o_.ctx)
    fail(ErrorKind::Input, "the prompt has " + std::to_string(n) +
                               " tokens, more than the context of " + std::to_string(o_.ctx) +
                               " per slot");
  const int32_t vocab = static_cast<int32_t>(engine_.cfg().n_vocab);
  const auto check_id = [vocab](int32_t t, const char* what) {
    if (t < 0 || t >= vocab)
      fail(ErrorKind::Input, std::string(what) + "token id " + std::to_string(t) +
                                 " is outside the vocabulary of " + std::to_string(vocab));
  };
  for (int32_t t : request.prompt) check_id(t, "");
  if (request.embed && embedding_.pooling == Pooling::None)
    fail(ErrorKind::Input, embedding_.why_none);
  // Every row of an embedding's prompt is pooled, so none may come from a cache.
  if (request.embed) request.cache_prompt = false;
  for (const auto& [t, bias] : request.sampling.logit_bias) check_id(t, "logit_bias: ");
  if (request.max_tokens == 0) fail(ErrorKind::Input, "max_tokens must be at least 1");
  if (request.top_logprobs > kMaxTopLogprobs)
    fail(ErrorKind::Input,
         "at most " + std::to_string(kMaxTopLogprobs) + " top log-probabilities per token");
  const Sampler check(request.sampling);  // a bad parameter is the caller's error, not the thread's
  if (request.json || request.tools)
    std::call_once(json_vocab_once_, [&] { json_vocab_ = json_vocabulary(tok_, o_.shown_tokens); });
  auto job = std::make_shared<Job>(std::move(request));
  {
    std::lock_guard lock(mu_);
    if (stopping_) fail(ErrorKind::Runtime, "the server is shutting down");
    if (!model_failure_.empty()) fail(ErrorKind::Runtime, model_failure_);
    std::erase_if(queue_, [](const std::shared_ptr<Job>& j) { return j->cancelled(); });
    // Free slots take requests through the queue too, so they do not count against its capacity.
    const size_t free_slots = static_cast<size_t>(o_.parallel - busy_.load());
    if (queue_.size() >= o_.queue_capacity + free_slots) return nullptr;
    queue_.push_back(job);
  }
  cv_.notify_one();
  return job;
}

SchedulerStats Scheduler::stats() {
  SchedulerStats st;
  {
    std::lock_guard lock(mu_);
    std::erase_if(queue_, [](const std::shared_ptr<Job>& j) { return j->cancelled(); });
    st.queued = queue_.size();
    st.model_failure = model_failure_;
  }
  st.slots_total = o_.parallel;
  st.slots_busy = busy_.load();
  st.steps = steps_.load();
  st.decode_rows = decode_rows_.load();
  st.prefill_rows = prefill_rows_.load();
  st.cached_rows = cached_rows_.load();
  st.drafted = drafted_.load();
  st.draft_matched = draft_matched_.load();
  return st;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The thread is gone: its slots and the queue are this thread's now.
  for (Slot& s : slots_) {
    if (s.job == nullptr) continue;
    release(s)->fail("the server is shutting down");
  }
  std::lock_guard lock(mu_);
  for (const auto& j : queue_) j->fail("the server is shutting down");
  queue_.clear();
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || busy_.load() > 0 || !queue_.empty(); });
      if (stopping_) return;
      admit_locked();
    }
    step();
  }
}

void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    if (queue_.front()->cancelled()) {
      queue_.pop_front();
      continue;
    }
    const Placement p = pick_slot(queue_.front()->request());
    if (p.slot == nullptr || shares_a_prefill(queue_.front()->request(), p.kept)) return;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    start(p, std::move(job));
  }
}

// A cached prefix is used only when it is at least this share of the prompt. Below it, the
// saving is small, and taking that slot would throw away a cache that a later request (the rest
// of that conversation) could use whole; a short shared start such as BOS is not worth it.
constexpr int64_t kMinSharedPercent = 50;

namespace {

// Tokens at the start of `a` and `b` that are the same.
int64_t shared_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<int64_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<ptrdiff_t>(n), b.begin()).first - a.begin());
}

// Rows at the start of two prompts that are the same: the same tokens, and where either is an
// image's row, the same image (its rows' keys: a hash of the image's bytes).
int64_t shared_rows(const std::vector<int32_t>& a, const ImageRows* ia,
                    const std::vector<int32_t>& b, const ImageRows* ib) {
  const int64_t n = shared_prefix(a, b);
  if (ia == nullptr && ib == nullptr) return n;
  for (int64_t i = 0; i < n; ++i)
    if ((ia ? ia->key(i) : 0) != (ib ? ib->key(i) : 0)) return i;
  return n;
}

}  // namespace

int64_t Scheduler::reusable(const Slot& s, const GenRequest& r) const {
  if (!r.cache_prompt) return 0;
  const auto n = static_cast<int64_t>(r.prompt.size());
  int64_t common = shared_rows(s.tokens, s.images.get(), r.prompt, r.images.get());
  // The next token is sampled from the last prompt row's logits: either kept from when this very
  // prompt was prefilled, or that row is fed again.
  if (common == n && s.prompt_logits_rows != n) common = n - 1;
  common = s.kv->resumable(common);  // a recurrent state returns to its checkpoints only
  return common * 100 >= n * kMinSharedPercent ? common : 0;
}

Scheduler::Placement Scheduler::pick_slot(const GenRequest& r) {
  Placement p;
  int64_t own = -1;
  for (Slot& s : slots_) {
    if (s.job != nullptr) continue;
    const int64_t rows = reusable(s, r);
    if (rows > own || (rows == own && s.admitted < p.slot->admitted)) {
      p.slot = &s;
      own = rows;
    }
  }
  if (p.slot == nullptr) return p;
  p.kept = own;
  for (const Slot& s : slots_) {
    if (&s == p.slot) continue;
    const int64_t rows = reusable(s, r);
    if (rows > p.kept) p.kept = rows, p.from = &s;
  }
  return p;
}

bool Scheduler::shares_a_prefill(const GenRequest& r, int64_t kept) const {
  if (!r.cache_prompt) return false;
  const auto n = static_cast<int64_t>(r.prompt.size());
  for (const Slot& s : slots_) {
    if (!prefilling(s)) continue;
    const GenRequest& other = s.job->request();
    const int64_t common = shared_rows(other.prompt, other.images.get(), r.prompt, r.images.get());
    if (common > kept && common * 100 >= n * kMinSharedPercent) return true;
  }
  return false;
}

void Scheduler::start(const Placement& p, std::shared_ptr<Job> job) {
  Slot& s = *p.slot;
  int64_t kept = p.kept;
  const GenRequest& r = job->request();
  DecodeOptions d;
  d.max_tokens = r.max_tokens;
  d.room = s.kv->ctx() - static_cast<int64_t>(r.prompt.size());
  d.ignore_eos = r.ignore_eos;
  d.stop = r.stop;
  d.sampling = r.sampling;
  d.json = r.json;
  d.json_vocab = json_vocab_;
  d.tools = r.tools;
  d.tool_required = r.tool_required;
  d.shown_tokens = o_.shown_tokens;
  d.reasoning = &o_.reasoning;
  d.reasoning_budget = r.reasoning_budget;
  d.reasoning_open = r.reasoning_open;
  try {
    if (r.embed)
      s.pooler.emplace(embedding_, engine_.cfg().n_embd);
    else
      s.dec.emplace(tok_, std::move(d), r.prompt);
  } catch (const std::exception& e) {
    job->fail(e.what());
    return;
  }
  if (p.from != nullptr) {  // another slot's rows, and the logits after them if they are a prompt
    kept = s.kv->copy_rows_from(*p.from->kv, kept);
    s.tokens.assign(p.from->tokens.begin(), p.from->tokens.begin() + kept);
    s.prompt_logits = p.from->prompt_logits;
    s.prompt_logits_rows = p.from->prompt_logits_rows;
  } else {
    kept = s.kv->rewind(kept);
  }
  s.tokens.resize(static_cast<size_t>(kept));
  // The kept rows match this prompt's, images included (reusable()): its keys are the slot's.
  s.images = r.images;
  s.replay.clear();
  if (s.prompt_logits_rows > kept) s.prompt_logits_rows = 0;  // rows about to be overwritten
  s.sample_first = kept == static_cast<int64_t>(r.prompt.size());
  if (s.sample_first) std::copy(s.prompt_logits.begin(), s.prompt_logits.end(), s.logits.begin());
  cached_rows_.fetch_add(static_cast<uint64_t>(kept));
  s.fed = kept;
  s.cached = kept;
  s.admitted = ++admissions_;
  s.job = std::move(job);
  busy_.fetch_add(1);
}

bool Scheduler::prefilling(const Slot& s) const {
  return s.job != nullptr && s.fed < static_cast<int64_t>(s.job->request().prompt.size());
}

void Scheduler::step() {
  for (Slot& s : slots_)
    if (s.job != nullptr && s.job->cancelled()) release(s);
  for (Slot& s : slots_) {
    if (s.job == nullptr || !s.sample_first) continue;
    s.sample_first = false;
    sample(s, {}, 0);
  }
  chunks_.clear();
  chunk_slots_.clear();
  int64_t rows = 0;
  for (const Slot& s : slots_) rows += s.job != nullptr && !prefilling(s) ? 1 : 0;
  // Each generating slot's row comes first; guesses take the rows left after those.
  for (Slot& s : slots_) {
    if (s.job == nullptr || prefilling(s)) continue;
    if (!decode_pass(s, forward_.max_rows() - rows)) continue;
    const auto n = static_cast<int64_t>(s.pass.size());
    // Guesses a recurrent state cannot take back: the state before them is kept.
    if (s.pass.size() > s.pass_first + 1) s.kv->checkpoint();
    rows += n - 1;
    chunks_.push_back(SeqChunk{s.kv.get(), s.pass.data(), n, s.logits.data(), n > 1});
    chunk_slots_.push_back(&s);
  }
  const size_t n_decode = chunks_.size();
  const int64_t decode_rows = rows;
  // Prompts fill the rows the decode steps leave free, oldest first: a step never grows past
  // max_rows, so a long prompt costs each running stream one bounded step at a time.
  std::vector<Slot*> waiting;
  for (Slot& s : slots_)
    if (prefilling(s)) waiting.push_back(&s);
  std::sort(waiting.begin(), waiting.end(),
            [](const Slot* a, const Slot* b) { return a->admitted < b->admitted; });
  for (Slot* s : waiting) {
    const int64_t budget = forward_.max_rows() - rows;
    if (budget <= 0) break;
    const std::vector<int32_t>& prompt = s->job->request().prompt;
    int64_t n = std::min(budget, static_cast<int64_t>(prompt.size()) - s->fed);
    // A chunk ends at each checkpoint position of a recurrent model.
    if (o_.checkpoint_every > 0 && s->kv->recurrent())
      n = std::min(n, o_.checkpoint_every - s->fed % o_.checkpoint_every);
    // An image whose rows attend to each other goes whole into one pass: it waits for a pass
    // with room (one that cannot fit even a whole pass is refused by the forward).
    if (s->job->request().images) {
      const int64_t whole = s->job->request().images->inputs().from(s->fed).whole_images(n);
      if (whole == 0 && budget < forward_.max_rows()) continue;
      if (whole > 0) n = whole;
    }
    const bool last = s->fed + n == static_cast<int64_t>(prompt.size());
    chunks_.push_back(SeqChunk{s->kv.get(), prompt.data() + s->fed, n,
                               last && !s->pooler ? s->logits.data() : nullptr, false});
    // Each chunk's rows of the pass are its own rows of hidden_rows_.
    if (s->pooler)
      s->pooler->want(chunks_.back(), s->fed, static_cast<int64_t>(prompt.size()),
                      hidden_rows_.data() + rows * engine_.cfg().n_embd);
    if (s->job->request().images)
      chunks_.back().in = s->job->request().images->inputs().from(s->fed);
    chunk_slots_.push_back(s);
    rows += n;
  }
  if (chunks_.empty()) return;
  try {
    forward_.run(chunks_);
  } catch (const std::exception& e) {
    for (Slot* s : chunk_slots_) {
      forget_cache(*s);  // its rows may be half written
      release(*s)->fail(std::string("generation failed: ") + e.what());
    }
    return;
  }
  if (model_changed()) return;
  steps_.fetch_add(1);
  decode_rows_.fetch_add(static_cast<uint64_t>(decode_rows));
  prefill_rows_.fetch_add(static_cast<uint64_t>(rows - decode_rows));
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Slot& s = *chunk_slots_[i];
    s.tokens.insert(s.tokens.end(), chunks_[i].tokens, chunks_[i].tokens + chunks_[i].n);
    if (i < n_decode) {
      verify_pass(s);
      continue;
    }
    s.fed += chunks_[i].n;
    if (s.pooler) {
      s.pooler->add(chunks_[i], s.fed - chunks_[i].n);
      if (!prefilling(s)) finish_embedding(s);
      continue;
    }
    const bool at_interval = o_.checkpoint_every > 0 && s.fed % o_.checkpoint_every == 0;
    if (chunks_[i].logits != nullptr || at_interval) s.kv->checkpoint();
    if (chunks_[i].logits == nullptr) continue;
    // Sampling masks and biases s.logits in place: keep the model's own for a repeat.
    std::copy_n(s.logits.begin(), s.prompt_logits.size(), s.prompt_logits.begin());
    s.prompt_logits_rows = s.fed;
    sample(s, {}, 0);
  }
}

bool Scheduler::decode_pass(Slot& s, int64_t budget) {
  // The rows taken back with a rejected guess, then `next`, without guesses: a pass that nothing
  // can take back. Where the step has no room for them, they are fed first, on their own.
  if (static_cast<int64_t>(s.replay.size()) > budget && !feed_replay(s)) return false;
  if (!s.replay.empty()) {
    s.pass = s.replay;
    s.pass_first = s.replay.size();
    s.pass.push_back(s.dec->next());
    s.replay.clear();
    return true;
  }
  s.pass.assign(1, s.dec->next());
  s.pass_first = 0;
  const std::vector<int32_t> draft = s.dec->draft(std::min(o_.lookup, budget));
  s.pass.insert(s.pass.end(), draft.begin(), draft.end());
  drafted_.fetch_add(draft.size());
  return true;
}

bool Scheduler::feed_replay(Slot& s) {
  try {
    for (size_t start = 0; start < s.replay.size();) {
      const auto n =
          std::min<int64_t>(forward_.max_rows(), static_cast<int64_t>(s.replay.size() - start));
      forward_.run({SeqChunk{s.kv.get(), s.replay.data() + start, n}});
      start += static_cast<size_t>(n);
    }
  } catch (const std::exception& e) {
    forget_cache(s);
    release(s)->fail(std::string("generation failed: ") + e.what());
    return false;
  }
  s.tokens.insert(s.tokens.end(), s.replay.begin(), s.replay.end());
  s.replay.clear();
  return true;
}

void Scheduler::verify_pass(Slot& s) {
  const size_t row = sample(s, s.pass, s.pass_first);
  // The rows after `row` hold guesses that were not taken (or came after the answer's end).
  const auto untaken = static_cast<int64_t>(s.pass.size() - row - 1);
  if (untaken == 0) return;
  const int64_t want = s.kv->n_past() - untaken;
  const int64_t at = s.kv->rewind(want);
  s.tokens.resize(static_cast<size_t>(want));
  // A recurrent state went back to the checkpoint before the pass: the taken rows are fed again.
  if (s.job != nullptr) s.replay.assign(s.tokens.begin() + at, s.tokens.end());
  s.tokens.resize(static_cast<size_t>(at));
}

size_t Scheduler::sample(Slot& s, std::span<const int32_t> pass, size_t first) {
  const GenRequest& r = s.job->request();
  const size_t vocab = s.prompt_logits.size();
  size_t row = first;
  try {
    row = s.dec->verify(s.logits.data(), vocab, pass, first, [&](std::span<const float> logits) {
      if (r.top_logprobs >= 0) s.job->record(token_logprobs(logits, s.dec->next(), r.top_logprobs));
      s.job->emit(s.dec->take_text());
    });
  } catch (const std::exception& e) {
    release(s)->fail(std::string("generation failed: ") + e.what());
    return row;
  }
  draft_matched_.fetch_add(row - first);
  if (s.dec->done()) finish(s);
  return row;
}

void Scheduler::finish(Slot& s) {
  s.job->emit(s.dec->take_text());
  const Usage usage{static_cast<int64_t>(s.job->request().prompt.size()), s.dec->generated(),
                    s.cached};
  s.kv->checkpoint();  // where a continued conversation will resume
  std::vector<ToolCall> calls = s.dec->tool_calls();
  const FinishReason reason = s.dec->finish_reason();
  release(s)->finish(reason, usage, std::move(calls));
}

void Scheduler::finish_embedding(Slot& s) {
  const auto n = static_cast<int64_t>(s.job->request().prompt.size());
  std::vector<float> v = s.pooler->finish(n);
  release(s)->finish_embedding(std::move(v), Usage{n, 0, 0});
}

// The slot is free (and counted so) before its job is told it ended: a client that reads /health
// right after its answer finds the slot free.
std::shared_ptr<Job> Scheduler::release(Slot& s) {
  std::shared_ptr<Job> job = std::move(s.job);
  s.dec.reset();
  s.pooler.reset();
  s.sample_first = false;
  s.fed = 0;
  busy_.fetch_sub(1);
  return job;
}

bool Scheduler::model_changed() {
  std::string change;
  for (const MappedFile* f : model_files_)
    if (change = f->change(); !change.empty()) break;
  if (change.empty()) return false;
  const std::string why =
      "the model's files changed under the server, its answers would be "
      "wrong: " +
      change;
  for (Slot& s : slots_) {
    forget_cache(s);
    if (s.job != nullptr) release(s)->fail(why);
  }
  std::lock_guard lock(mu_);
  model_failure_ = why;
  for (const auto& j : queue_) j->fail(why);
  queue_.clear();
  return true;
}

void Scheduler::forget_cache(Slot& s) {
  s.tokens.clear();
  s.images.reset();
  s.replay.clear();
  s.kv->rewind(0);
  s.prompt_logits_rows = 0;
}

}  // namespace ts::server

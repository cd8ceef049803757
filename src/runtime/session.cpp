#include "runtime/session.h"

#include <algorithm>

#include "core/error.h"

namespace ts {

Session::Session(Engine& engine)
    : vocab_(engine.cfg().n_vocab),
      kv_(engine, engine.options().ctx),
      forward_(engine, engine.options().prefill_batch) {}

void Session::truncate(int64_t n) {
  if (n < 0 || n > kv_.n_past())
    fail(ErrorKind::Input, "cannot truncate a session of " + std::to_string(kv_.n_past()) +
                               " tokens to " + std::to_string(n));
  const int64_t at = kv_.rewind(n);
  tokens_.resize(static_cast<size_t>(n));
  for (int64_t start = at; start < n; start += forward_.max_rows()) {
    const int64_t M = std::min(forward_.max_rows(), n - start);
    forward_.run({SeqChunk{&kv_, tokens_.data() + start, M}});
  }
}

void Session::check_feed(const int32_t* tokens, int64_t n) const {
  if (n <= 0) fail(ErrorKind::Input, "nothing to feed: the token list is empty");
  if (kv_.n_past() + n > kv_.ctx())
    fail(ErrorKind::Input, std::to_string(kv_.n_past() + n) + " tokens exceed the context of " +
                               std::to_string(kv_.ctx()) + " (raise -c)");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_)
      fail(ErrorKind::Input, "token id " + std::to_string(tokens[i]) +
                                 " is outside the vocabulary of " + std::to_string(vocab_));
}

void Session::score(const int32_t* tokens, int64_t n, int64_t from, int64_t to,
                    const int32_t* targets, double* nll) {
  check_feed(tokens, n);
  if (from < 0 || from > to || to > n)
    fail(ErrorKind::Input, "cannot score rows [" + std::to_string(from) + ", " +
                               std::to_string(to) + ") of " + std::to_string(n) + " fed tokens");
  const int64_t batch = forward_.max_rows();
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t M = std::min(batch, n - start);
    // Rows [lo, hi) of this micro-batch are scored (none: the head is skipped).
    const int64_t lo = std::clamp<int64_t>(from - start, 0, M);
    const int64_t hi = std::clamp<int64_t>(to - start, lo, M);
    SeqChunk ch{&kv_, tokens + start, M};
    if (lo < hi) {
      ch.targets = targets + (start + lo - from);
      ch.score_from = lo;
      ch.score_to = hi;
      ch.nll = nll + (start + lo - from);
    }
    forward_.run({ch});
    tokens_.insert(tokens_.end(), tokens + start, tokens + start + M);
  }
}

void Session::feed(const int32_t* tokens, int64_t n, float* logits, bool all_rows,
                   const RowInputs& in) {
  check_feed(tokens, n);
  const int64_t batch = forward_.max_rows();
  for (int64_t start = 0, M = 0; start < n; start += M) {
    M = std::min(batch, n - start);
    // An image whose rows attend to each other starts the next pass rather than being parted
    // (one that does not fit a pass at all is refused by the forward).
    if (in.any()) M = std::max<int64_t>(in.from(start).whole_images(M), 1);
    const bool last = start + M == n;
    float* out = all_rows ? logits + start * vocab_ : (last ? logits : nullptr);
    SeqChunk ch{&kv_, tokens + start, M, out, all_rows};
    if (in.any()) ch.in = in.from(start);
    forward_.run({ch});
    tokens_.insert(tokens_.end(), tokens + start, tokens + start + M);
  }
}

}  // namespace ts

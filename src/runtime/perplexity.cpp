#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace ts {
namespace {

// -log softmax(row)[target], in double so that 200k summed terms keep their digits.
double nll(const float* row, int64_t V, int32_t target) {
  double mx = row[0];
  for (int64_t i = 1; i < V; ++i) mx = std::max<double>(mx, row[i]);
  double z = 0;
  for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(row[i]) - mx);
  return std::log(z) + mx - row[target];
}

// A row of the logits and the token it is scored against.
struct Scored {
  int64_t row;
  int32_t target;
};

// nll() of every scored row, on `threads` threads: a window of a 151,936-entry vocabulary is ~150M
// exponentials, which on one thread took a GPU run's whole time (1.3k tokens/s against its
// prompts' 68k). Each row's value is the same whichever thread computes it, and the caller sums
// them in row order, so the result does not depend on the thread count.
void score_rows(const float* logits, int64_t V, const std::vector<Scored>& rows, int threads_wanted,
                std::vector<double>& out) {
  out.resize(rows.size());
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t threads = std::clamp<int64_t>(threads_wanted, 1, std::max<int64_t>(n, 1));
  const auto span = [&](int64_t t) {
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i)
      out[static_cast<size_t>(i)] = nll(logits + rows[static_cast<size_t>(i)].row * V, V,
                                        rows[static_cast<size_t>(i)].target);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(span, t);
  span(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

PerplexityResult perplexity(Engine& engine, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& o,
                            const std::function<void(int64_t, int64_t, double)>& progress) {
  const int64_t n_ctx = o.ctx;
  if (n_ctx < 2) fail(ErrorKind::Usage, "perplexity needs a context of at least 2 tokens");
  if (n_ctx > engine.options().ctx)
    fail(ErrorKind::Usage, "perplexity context exceeds the engine's context");
  const int64_t available = static_cast<int64_t>(tokens.size()) / n_ctx;
  const int64_t windows = o.max_windows > 0 ? std::min(o.max_windows, available) : available;
  if (windows == 0)
    fail(ErrorKind::Input, "the text has " + std::to_string(tokens.size()) +
                               " tokens, fewer than one window of " + std::to_string(n_ctx) +
                               " (lower -c)");
  const int64_t V = engine.cfg().n_vocab;
  const int64_t first = o.scoring == PerplexityScoring::SecondHalf ? n_ctx / 2 : 0;
  const int64_t batch = engine.options().prefill_batch;
  Session s(engine);
  std::vector<float> logits(static_cast<size_t>(batch * V));
  std::vector<int32_t> window(static_cast<size_t>(n_ctx));
  // The engine's CPU threads (-t; the physical cores by default) score the rows.
  const int threads = engine.options().threads > 0 ? engine.options().threads : physical_cores();
  std::vector<Scored> scored;
  std::vector<double> nlls;
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    std::copy_n(tokens.begin() + w * n_ctx, n_ctx, window.begin());
    if (o.scoring == PerplexityScoring::SecondHalf && o.bos >= 0) window[0] = o.bos;
    s.reset();
    for (int64_t start = 0; start < n_ctx; start += batch) {
      const int64_t M = std::min(batch, n_ctx - start);
      // A micro-batch before the scored rows wants no logits: the head is skipped for it (a
      // tenth to a fifth of a small model's forward), the cache it fills the same.
      if (start + M <= first) {
        s.feed(window.data() + start, M, nullptr, false);
        continue;
      }
      s.feed(window.data() + start, M, logits.data(), true);
      // Row j predicts token j + 1 of the window (the original token, not the BOS stand-in).
      scored.clear();
      for (int64_t r = 0; r < M; ++r) {
        const int64_t j = start + r;
        if (j >= first && j + 1 < n_ctx)
          scored.push_back({r, tokens[static_cast<size_t>(w * n_ctx + j + 1)]});
      }
      score_rows(logits.data(), V, scored, threads, nlls);
      for (const double x : nlls) {
        sum += x;
        sum2 += x * x;
        ++count;
      }
    }
    if (progress) progress(w + 1, windows, std::exp(sum / static_cast<double>(count)));
  }
  PerplexityResult r;
  r.mean_nll = sum / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  const double var = sum2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  r.stderr_ppl = var > 0 && count > 1 ? std::sqrt(var / static_cast<double>(count - 1)) * r.ppl : 0;
  r.scored = count;
  r.windows = windows;
  r.tokens = static_cast<int64_t>(tokens.size());
  return r;
}

}  // namespace ts

#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace ts {

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
  // Row j predicts token j + 1 of the window (the original token, not the BOS stand-in): rows
  // [first, n_ctx - 1) are scored, by the backend where their logits are (a device sends back
  // only the values), each in double and summed here in row order.
  const int64_t first = o.scoring == PerplexityScoring::SecondHalf ? n_ctx / 2 : 0;
  const int64_t rows = n_ctx - 1 - first;
  if (rows < 1)
    fail(ErrorKind::Usage,
         "a window of " + std::to_string(n_ctx) + " tokens has no second half to score (raise -c)");
  Session s(engine);
  std::vector<int32_t> window(static_cast<size_t>(n_ctx));
  std::vector<double> nlls(static_cast<size_t>(rows));
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    std::copy_n(tokens.begin() + w * n_ctx, n_ctx, window.begin());
    if (o.scoring == PerplexityScoring::SecondHalf && o.bos >= 0) window[0] = o.bos;
    s.reset();
    s.score(window.data(), n_ctx, first, n_ctx - 1, tokens.data() + w * n_ctx + first + 1,
            nlls.data());
    for (const double x : nlls) {
      sum += x;
      sum2 += x * x;
      ++count;
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

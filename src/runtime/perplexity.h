// Perplexity over a token stream, by llama.cpp's method (non-overlapping windows of ctx tokens,
// each starting with BOS, the second half of each window scored) or by scoring every position
// after the first of each window (the Hugging Face reference method of tiny-moe).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ts {

class Engine;

enum class PerplexityScoring { SecondHalf, All };

struct PerplexityOptions {
  int64_t ctx = 512;
  PerplexityScoring scoring = PerplexityScoring::SecondHalf;
  int32_t bos = -1;  // SecondHalf: replaces each window's first token (llama.cpp); -1 = keep it
  int64_t max_windows = 0;  // score only the first windows (llama.cpp's --chunks); 0 = all
};

struct PerplexityResult {
  double ppl = 0;
  double stderr_ppl = 0;  // llama.cpp's estimate: ppl * stddev(nll) / sqrt(n - 1)
  double mean_nll = 0;
  int64_t scored = 0;
  int64_t windows = 0;
  int64_t tokens = 0;
};

// `progress(done_windows, total_windows, running_ppl)` is called after each window.
PerplexityResult perplexity(Engine& engine, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& o,
                            const std::function<void(int64_t, int64_t, double)>& progress = {});

}  // namespace ts

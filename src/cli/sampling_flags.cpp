#include "cli/sampling_flags.h"

#include <CLI/CLI.hpp>
#include <chrono>

namespace ts::cli {

void add_sampling_flags(CLI::App* app, SamplingFlags& f) {
  app->add_option("-n,--n-predict", f.n_predict,
                  "Tokens to generate (-1: until EOS or the context is full)");
  app->add_option("--temp", f.params.temperature, "Temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", f.params.top_k, "Top-k (0: off)");
  app->add_option("--top-p", f.params.top_p, "Top-p (1: off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--min-p", f.params.min_p, "Min-p (0: off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--repeat-penalty", f.params.repeat_penalty, "Repetition penalty (1: off)");
  app->add_option("--presence-penalty", f.params.presence_penalty, "Presence penalty");
  app->add_option("--frequency-penalty", f.params.frequency_penalty, "Frequency penalty");
  app->add_option("--repeat-last-n", f.params.penalty_last_n,
                  "Tokens the penalties look back over (-1: all)");
  app->add_option("-s,--seed", f.seed, "Random seed (-1: from the clock)");
  app->add_flag("--ignore-eos", f.ignore_eos, "Keep generating past end-of-sequence tokens");
  app->add_option("--stop", f.stop, "Stop when this string is generated (repeatable)");
}

GenerateOptions generate_options(const SamplingFlags& f) {
  GenerateOptions o;
  o.max_tokens = f.n_predict;
  o.ignore_eos = f.ignore_eos;
  o.stop = f.stop;
  o.sampling = f.params;
  o.sampling.seed =
      f.seed >= 0
          ? static_cast<uint64_t>(f.seed)
          : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return o;
}

}  // namespace ts::cli

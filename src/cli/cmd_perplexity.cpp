// `turbospark perplexity [-m MODEL] -f TEXT | --tokens FILE [-c CTX] [--chunks N] [--score all]
// [--json]`
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/number_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "runtime/footprint.h"
#include "runtime/model_tokenizer.h"
#include "runtime/perplexity.h"

namespace ts::cli {
namespace {

struct PerplexityArgs {
  ModelFlags model;
  std::string text_file;
  std::string tokens_file;
  std::string score = "half";
  int64_t chunks = 0;
  bool json = false;
};

std::string read_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::Usage, std::string(flag) + ": cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int run_perplexity(PerplexityArgs& a) {
  if (a.text_file.empty() == a.tokens_file.empty())
    fail(ErrorKind::Usage, "give exactly one of -f TEXT and --tokens FILE");
  const int64_t window = a.model.ctx;
  a.model.ctx = std::max<int64_t>(window, 2);
  auto engine = Engine::open(model_path(a.model, true), engine_options(a.model));
  std::vector<int32_t> tokens;
  int32_t bos = -1;
  if (!a.text_file.empty()) {
    const Tokenizer tok = load_tokenizer(engine->spec());
    // llama.cpp's method: the whole text at once, BOS first when the model adds one.
    tokens = tok.encode(read_file(a.text_file, "-f"), tok.add_bos(), false);
    if (tok.add_bos()) bos = tok.bos();
  } else {
    const std::string raw = read_file(a.tokens_file, "--tokens");
    if (raw.size() % 4 != 0)
      fail(ErrorKind::Usage, "--tokens: file size is not a multiple of 4 (int32 ids)");
    tokens.resize(raw.size() / 4);
    std::memcpy(tokens.data(), raw.data(), raw.size());
  }
  PerplexityOptions o;
  o.ctx = window;
  o.scoring = a.score == "all" ? PerplexityScoring::All : PerplexityScoring::SecondHalf;
  o.bos = bos;
  o.max_windows = a.chunks;
  Progress bar("perplexity", !a.json);
  const PerplexityResult r =
      perplexity(*engine, tokens, o, [&](int64_t done, int64_t total, double ppl) {
        char note[64];
        std::snprintf(note, sizeof note, "ppl %.4f", ppl);
        bar.update(done, total, note);
      });
  bar.finish();
  if (a.json) {
    nlohmann::json j{{"ppl", r.ppl},       {"stderr", r.stderr_ppl}, {"mean_nll", r.mean_nll},
                     {"tokens", r.tokens}, {"scored", r.scored},     {"windows", r.windows},
                     {"ctx", window},      {"score", a.score}};
    if (engine->experts().streaming()) j["experts"] = engine->experts().stats_json();
    j["footprint"] = footprint_json(engine->footprint());
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["program_rss_bytes"] = program_rss_bytes();
    j["peak_device_bytes"] = engine->backend().device_peak_bytes();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("PPL = %.4f +/- %.5f (%lld windows of %lld, %lld scored tokens)\n", r.ppl,
                r.stderr_ppl, static_cast<long long>(r.windows), static_cast<long long>(window),
                static_cast<long long>(r.scored));
  }
  return 0;
}

}  // namespace

Runner add_perplexity(CLI::App& app) {
  auto* sub = app.add_subcommand("perplexity",
                                 "Perplexity of a text (llama.cpp's method) or a token stream");
  auto a = std::make_shared<PerplexityArgs>();
  add_model_flags(sub, a->model, true);
  a->model.ctx = 512;
  sub->add_option("-f,--file", a->text_file, "UTF-8 text file");
  sub->add_option("--tokens", a->tokens_file, "Raw little-endian int32 token ids instead of text");
  sub->add_option(
         "--score", a->score,
         "half: second half of each window (llama.cpp); all: every position after the first")
      ->check(CLI::IsMember({"half", "all"}));
  sub->add_option("--chunks", a->chunks, "Score only the first N windows (0: all)")
      ->check(at_least(0));
  sub->add_flag("--json", a->json, "Print one JSON object");
  return [a] { return run_perplexity(*a); };
}

}  // namespace ts::cli

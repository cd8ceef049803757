// `turbospark run [-m MODEL] -p PROMPT [-n N] [sampling flags]`: prints the continuation token by
// token, then one stats line on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/image_flags.h"
#include "cli/model_flags.h"
#include "cli/run_stats.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"

namespace ts::cli {
namespace {

struct RunArgs {
  ModelFlags model;
  ImageFlags images;
  SamplingFlags sampling;
  std::string prompt;
  std::string prompt_file;  // -f: the prompt read from a file
  bool no_bos = false;
  bool show_prompt = true;
  std::string stats_json;
};

// Machine-readable stats for tests and scripts: footprint, peak RSS (and device memory), the
// program's own resident code, expert statistics.
void write_stats_json(Engine& engine, const GenerateResult& r, const std::string& path) {
  nlohmann::json j{{"footprint", footprint_json(engine.footprint())},
                   {"peak_rss_bytes", peak_rss_bytes()},
                   {"program_rss_bytes", program_rss_bytes()},
                   {"peak_device_bytes", engine.backend().device_peak_bytes()},
                   {"prompt_tokens", r.prompt_tokens},
                   {"generated_tokens", r.tokens.size()},
                   {"prompt_seconds", r.prompt_seconds},
                   {"generate_seconds", r.generate_seconds},
                   {"passes", r.passes},
                   {"lookup_drafted", r.drafted},
                   {"lookup_matched", r.draft_matched},
                   {"experts", engine.experts().stats_json()}};
  std::ofstream out(path);
  if (!out) fail(ErrorKind::Usage, "--stats-json: cannot create '" + path + "'");
  out << j.dump(2) << "\n";
}

int run_run(const RunArgs& a) {
  std::string text = a.prompt;
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) fail(ErrorKind::Usage, "-f: cannot read '" + a.prompt_file + "'");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.empty()) fail(ErrorKind::Usage, "the prompt is empty (-p TEXT or -f FILE)");
  GenerateOptions options = generate_options(a.sampling);  // flag errors before the model
  const std::string path = model_path(a.model, true);
  auto engine = Engine::open(path, engine_options(a.model));
  print_footprint(engine->footprint(), stderr);
  const Tokenizer tok = load_tokenizer(engine->spec());
  warn_beyond_trained_context(*engine, a.model);
  const bool bos = tok.add_bos() && !a.no_bos;
  std::vector<int32_t> prompt = tok.encode(text, bos, false);
  // --image: each image's block (vision start, its placeholder tokens, vision end) before the
  // text, its features in those rows.
  const CommandImages images = encode_images(a.images, *engine, path, engine->options().threads);
  std::unique_ptr<ImageRows> rows;
  if (!images.encoded.empty()) {
    const ImageTokens t = image_tokens(a.images, path, &tok, images.margin);
    prompt = with_image_blocks(prompt, bos, images.encoded, t);
    rows = std::make_unique<ImageRows>(prompt, t.image, images.encoded, engine->cfg().n_embd,
                                       engine->cfg().n_deepstack, images.layout);
    options.prompt_inputs = rows->inputs();
  }
  Session session(*engine);
  // Refused before any text is printed.
  if (static_cast<int64_t>(prompt.size()) >= session.ctx())
    fail(ErrorKind::Input, std::to_string(prompt.size()) + " tokens exceed the context of " +
                               std::to_string(session.ctx()) + " (raise -c)");
  if (a.show_prompt) std::printf("%s", text.c_str());
  std::fflush(stdout);
  const GenerateResult r = generate(session, tok, prompt, options, [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  print_run_stats(*engine, r, stderr);
  if (!a.stats_json.empty()) write_stats_json(*engine, r, a.stats_json);
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto* sub =
      app.add_subcommand("run", "Continue a prompt, streaming tokens as they are generated");
  auto a = std::make_shared<RunArgs>();
  add_model_flags(sub, a->model, true);
  add_image_flags(sub, a->images);
  add_sampling_flags(sub, a->sampling);
  a->sampling.n_predict = 64;
  auto* prompt = sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-f,--file", a->prompt_file, "Read the prompt from FILE (as llama.cpp's -f)")
      ->excludes(prompt);
  sub->add_flag("--no-bos", a->no_bos, "Do not prepend the BOS token");
  sub->add_flag("!--no-display-prompt", a->show_prompt, "Print only the continuation");
  sub->add_option("--stats-json", a->stats_json,
                  "Also write the stats (footprint, peak RSS, experts) as JSON to FILE");
  return [a] { return run_run(*a); };
}

}  // namespace ts::cli

// `turbospark run [-m MODEL] -p PROMPT [-n N] [sampling flags]`: prints the continuation token by
// token, then one stats line on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/run_stats.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"

namespace ts::cli {
namespace {

struct RunArgs {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt;
  bool no_bos = false;
  bool show_prompt = true;
};

int run_run(const RunArgs& a) {
  if (a.prompt.empty()) fail(ErrorKind::Usage, "the prompt is empty (-p TEXT)");
  auto engine = Engine::open(model_path(a.model, true), engine_options(a.model));
  print_footprint(engine->footprint(), stderr);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const std::vector<int32_t> prompt = tok.encode(a.prompt, tok.add_bos() && !a.no_bos, false);
  Session session(*engine);
  if (a.show_prompt) std::printf("%s", a.prompt.c_str());
  std::fflush(stdout);
  const GenerateResult r = generate(session, tok, prompt, generate_options(a.sampling), [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  print_run_stats(*engine, r, stderr);
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "Continue a prompt, streaming tokens as they are generated");
  auto a = std::make_shared<RunArgs>();
  add_model_flags(sub, a->model, true);
  add_sampling_flags(sub, a->sampling);
  a->sampling.n_predict = 64;
  sub->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  sub->add_flag("--no-bos", a->no_bos, "Do not prepend the BOS token");
  sub->add_flag("!--no-display-prompt", a->show_prompt, "Print only the continuation");
  return [a] { return run_run(*a); };
}

}  // namespace ts::cli

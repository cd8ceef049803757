// turbospark: the command-line entry point. Errors are one line on stderr; the exit code is 1
// for usage errors, 2 for a model that cannot be opened (see core/error.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_cpp_flags.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"turbospark: LLM inference for dense and Mixture-of-Experts models (GGUF or HF)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.set_version_flag("--version", std::string("turbospark ") + TURBOSPARK_VERSION);
  std::vector<std::pair<CLI::App*, ts::cli::Runner>> runners;
  auto add = [&](ts::cli::Runner (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    ts::cli::Runner r = fn(app);
    runners.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(ts::cli::add_inspect);
  add(ts::cli::add_logits);
  add(ts::cli::add_perplexity);
  add(ts::cli::add_run);
  add(ts::cli::add_synth);
  add(ts::cli::add_bench);
  add(ts::cli::add_chat);
  add(ts::cli::add_serve);
  add(ts::cli::add_quantize);
  add(ts::cli::add_convert);
  add(ts::cli::add_embed);
  try {
    app.name(argv[0]);  // as parse(argc, argv) would name it in --help
    std::vector<std::string> args(argv + 1, argv + argc);
    args = ts::cli::translate_llama_cpp_flags(std::move(args));
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
    app.parse(args);
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "turbospark: error: %s\n", e.what());
    return ts::exit_code_for(e.kind());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "turbospark: error: %s (see --help)\n", e.what());
    return 1;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "turbospark: error: %s\n", e.what());
    return ts::exit_code_for(e.kind());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "turbospark: error: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "turbospark: error: %s\n", e.what());
    return 3;
  }
  return 1;
}

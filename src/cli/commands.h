// The subcommands of `turbospark`. Each registers its flags on the app and returns the function
// that runs it once the command line is parsed.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace ts::cli {

using Runner = std::function<int()>;

Runner add_inspect(CLI::App& app);
Runner add_logits(CLI::App& app);
Runner add_perplexity(CLI::App& app);
Runner add_run(CLI::App& app);
Runner add_synth(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_chat(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_quantize(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_embed(CLI::App& app);

}  // namespace ts::cli

// `turbospark embed -m MODEL [TEXT ...]`: the embedding of each text (or, with none given, of
// each line of stdin) as one JSON array of floats a line, in order. The model pools as its files
// declare (model/pooling.h); one that declares no pooling is refused by name (exit 2).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "runtime/embedding.h"
#include "runtime/model_tokenizer.h"

namespace ts::cli {
namespace {

struct EmbedArgs {
  ModelFlags model;
  std::vector<std::string> texts;
};

void print_vector(const std::vector<float>& v) {
  const std::string line = nlohmann::json(v).dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int run_embed(const EmbedArgs& a) {
  auto engine = Engine::open(model_path(a.model, false), engine_options(a.model));
  const EmbeddingSpec spec = read_embedding_spec(*engine->spec().source);
  Embedder embedder(*engine, spec);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const auto embed = [&](const std::string& text, const std::string& what) {
    try {
      print_vector(embedder.embed(embedding_tokens(tok, text)));
    } catch (const Error& e) {
      fail(e.kind(), what + ": " + e.what());
    }
  };
  for (size_t i = 0; i < a.texts.size(); ++i) embed(a.texts[i], "text " + std::to_string(i + 1));
  if (!a.texts.empty()) return 0;
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n)
    embed(line, "stdin line " + std::to_string(n));
  return 0;
}

}  // namespace

Runner add_embed(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "embed", "Print the embedding of each text (or stdin line) as a JSON array, one a line");
  auto a = std::make_shared<EmbedArgs>();
  add_model_flags(sub, a->model, false);
  sub->add_option("texts", a->texts, "Texts to embed (none: each line of stdin)");
  return [a] { return run_embed(*a); };
}

}  // namespace ts::cli

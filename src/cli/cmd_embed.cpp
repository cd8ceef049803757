// `turbospark embed -m MODEL [TEXT ...]`: the embedding of each text (or, with none given, of
// each line of stdin) as one JSON array of floats a line, in order. The model pools as its files
// declare (model/pooling.h); one that declares no pooling is refused by name (exit 2). A decoder
// runs through an Engine, an encoder (BERT) through runtime/encoder.h, on the CPU.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "runtime/embedding.h"
#include "runtime/encoder.h"
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

// Prints the embedding of each text of `a` by `embed_ids`.
int embed_texts(const EmbedArgs& a, const Tokenizer& tok,
                const std::function<std::vector<float>(const std::vector<int32_t>&)>& embed_ids) {
  const auto embed = [&](const std::string& text, const std::string& what) {
    try {
      print_vector(embed_ids(embedding_tokens(tok, text)));
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

int run_embed(const EmbedArgs& a) {
  const std::string path = model_path(a.model, false);
  const EngineOptions options = engine_options(a.model);
  if (is_encoder_model(path)) {
    const auto encoder = Encoder::open(path, options.backend, options.threads);
    Pooler pooler(read_embedding_spec(encoder->source()), encoder->cfg().n_embd);
    return embed_texts(a, load_tokenizer(encoder->source()), [&](const std::vector<int32_t>& ids) {
      return encoder->embed(ids, pooler);
    });
  }
  auto engine = Engine::open(path, options);
  Embedder embedder(*engine, read_embedding_spec(*engine->spec().source));
  return embed_texts(a, load_tokenizer(engine->spec()),
                     [&](const std::vector<int32_t>& ids) { return embedder.embed(ids); });
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

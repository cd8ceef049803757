// `turbospark logits -m MODEL [--mmproj FILE] [--image FILE] --tokens 1,2,3 --out FILE
// [--mode prefill|decode]`: writes float32
// little-endian logits [tokens, vocab] for every position, for verification against references.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/image_flags.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "runtime/session.h"

namespace ts::cli {
namespace {

struct LogitsArgs {
  ModelFlags model;
  ImageFlags images;
  std::string tokens;
  std::string out;
  std::string mode = "prefill";
};

std::vector<int32_t> parse_tokens(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail(ErrorKind::Usage, "--tokens: '" + item + "' is not a token id");
    }
  }
  if (ids.empty()) fail(ErrorKind::Usage, "--tokens: no token ids given");
  return ids;
}

int run_logits(const LogitsArgs& a) {
  const std::vector<int32_t> ids = parse_tokens(a.tokens);
  const std::string path = model_path(a.model, false);
  auto engine = Engine::open(path, engine_options(a.model));
  Session session(*engine);
  const int64_t V = engine->cfg().n_vocab;
  std::vector<float> logits(ids.size() * static_cast<size_t>(V));
  // With --image, the ids hold each image's placeholder tokens (as transformers' processor lays
  // them out); the images' features take those rows.
  const CommandImages images = encode_images(a.images, *engine, path, engine->options().threads);
  std::unique_ptr<ImageRows> rows;
  if (!images.encoded.empty())
    rows = std::make_unique<ImageRows>(ids, image_tokens(a.images, path, nullptr, {}).image,
                                       images.encoded, engine->cfg().n_embd,
                                       engine->cfg().n_deepstack, images.layout);
  const RowInputs in = rows ? rows->inputs() : RowInputs{};
  if (a.mode == "prefill") {
    session.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true, in);
  } else {
    for (size_t i = 0; i < ids.size(); ++i)
      session.feed(&ids[i], 1, logits.data() + i * static_cast<size_t>(V), false,
                   in.any() ? in.from(static_cast<int64_t>(i)) : RowInputs{});
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(a.out.c_str(), "wb"), std::fclose);
  if (!f) fail(ErrorKind::Usage, "--out: cannot create '" + a.out + "'");
  if (std::fwrite(logits.data(), sizeof(float), logits.size(), f.get()) != logits.size())
    fail(ErrorKind::Runtime, "--out: write to '" + a.out + "' failed");
  std::fprintf(stderr, "wrote %zu x %lld logits to %s\n", ids.size(), static_cast<long long>(V),
               a.out.c_str());
  return 0;
}

}  // namespace

Runner add_logits(CLI::App& app) {
  auto* sub =
      app.add_subcommand("logits", "Write float32 logits [tokens, vocab] for given token ids");
  auto a = std::make_shared<LogitsArgs>();
  add_model_flags(sub, a->model, false);
  add_image_flags(sub, a->images);
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids")->required();
  sub->add_option("--out", a->out, "Output file (raw little-endian float32)")->required();
  sub->add_option("--mode", a->mode, "prefill (chunked) or decode (one token at a time)")
      ->check(CLI::IsMember({"prefill", "decode"}));
  return [a] { return run_logits(*a); };
}

}  // namespace ts::cli

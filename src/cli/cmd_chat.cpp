// `turbospark chat [-m MODEL] [--system TEXT] [--chat-template NAME|FILE.jinja]
// [--chat-template-kwargs JSON] [--reasoning show|hide]`: an interactive multi-turn conversation.
// The KV cache is kept between turns: each turn feeds only the tokens the session has not seen.
// Ctrl-C stops the current answer; /exit (or Ctrl-D) leaves.
#include <editline/readline.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "cli/chat_commands.h"
#include "cli/commands.h"
#include "cli/image_flags.h"
#include "cli/model_flags.h"
#include "cli/run_stats.h"
#include "cli/sampling_flags.h"
#include "cli/thinking_output.h"
#include "core/error.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "server/chat_prompt.h"
#include "server/image_parts.h"
#include "server/image_prompt.h"
#include "text/constraint_vocabulary.h"
#include "text/harmony.h"
#include "text/reasoning_budget.h"
#include "vision/vision_tower.h"

namespace ts::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  g_interrupted.store(true);
}

struct ChatArgs {
  ModelFlags model;
  ImageFlags images;
  SamplingFlags sampling;
  std::string system;
  std::string chat_template;
  std::string template_kwargs;  // a JSON object of template variables
  std::string reasoning = "show";
  int64_t reasoning_budget = -1;  // --reasoning-budget
  bool stats = false;
};

ChatOptions chat_options(const ChatArgs& a) {
  ChatOptions o;
  if (a.template_kwargs.empty()) return o;
  o.kwargs = nlohmann::ordered_json::parse(a.template_kwargs, nullptr, false);
  if (!o.kwargs.is_object())
    fail(ErrorKind::Usage,
         "--chat-template-kwargs must be a JSON object, e.g. "
         "'{\"enable_thinking\": false}'");
  return o;
}

// Reads one line with line editing on a terminal, plain getline otherwise (tests, pipes).
bool read_line(std::string& out) {
  if (::isatty(0)) {
    char* line = readline("> ");
    if (line == nullptr) return false;
    out = line;
    if (!out.empty()) add_history(line);
    std::free(line);
    return true;
  }
  std::fputs("> ", stdout);
  std::fflush(stdout);
  char buf[65536];
  if (std::fgets(buf, sizeof buf, stdin) == nullptr) return false;
  out = buf;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return true;
}

int run_chat(const ChatArgs& a) {
  const GenerateOptions options = generate_options(a.sampling);  // flag errors before the model
  const ChatOptions chat = chat_options(a);
  const std::string path = model_path(a.model, true);
  auto engine = Engine::open(path, engine_options(a.model));
  const Tokenizer tok = load_tokenizer(engine->spec());
  warn_beyond_trained_context(*engine, a.model);
  // Images: --image FILE goes with the first message, `/image FILE` with the next one; each
  // encoded once, its block where its marker is in the rendered conversation.
  const std::shared_ptr<VisionTower> vision =
      open_vision(a.images, *engine, path, engine->options().threads, !a.images.images.empty());
  const ImageTokens image_ids =
      vision ? image_tokens(a.images, path, &tok, vision->block_margin()) : ImageTokens{};
  std::vector<EncodedImage> encoded;  // every image of the conversation, in order
  size_t pending = 0;                 // of which the last `pending` go with the next message
  const auto add_image = [&](const std::string& file) {
    if (!vision) fail(ErrorKind::Usage, path + ": this model takes no images");
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(ErrorKind::Usage, "cannot read image '" + file + "'");
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    try {
      encoded.push_back(vision->encode_file(bytes.data(), bytes.size()));
    } catch (const Error& e) {
      fail(e.kind(), file + ": " + e.what());
    }
    ++pending;
  };
  for (const std::string& file : a.images.images) add_image(file);
  // The bundled model is a base model with no chat format: it talks in plain text.
  const std::string name =
      a.chat_template.empty() && a.model.model.empty() ? "raw" : a.chat_template;
  const ChatTemplate tmpl = model_chat_template(engine->spec(), tok, name);
  std::fprintf(stderr, "chat: %s, format %s; /help for commands, Ctrl-C stops an answer\n",
               engine->spec().source->path().c_str(), tmpl.describe().c_str());
  Session session(*engine);
  std::vector<ChatMessage> messages;
  if (!a.system.empty()) messages.push_back({"system", a.system});
  std::vector<int32_t> in_cache;  // the tokens the session holds, in order

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);

  // Made once: the vocabulary the schema masks with.
  const auto json_vocab = options.json != nullptr ? json_vocabulary(tok) : nullptr;
  // gpt-oss's channel markers, shown so that its analysis and final channels can be told apart.
  const std::vector<int32_t> shown =
      tmpl.harmony() ? server::chat_shown_tokens(tmpl, tok) : std::vector<int32_t>{};
  const ReasoningMarkers markers = reasoning_markers(tmpl, tok);
  uint64_t turn = 0;
  std::string line;
  while (read_line(line)) {
    if (line.empty()) continue;
    if (line.rfind("/image ", 0) == 0) {
      try {
        add_image(line.substr(7));
        std::fprintf(stderr, "chat: image %zu goes with the next message\n", encoded.size());
      } catch (const Error& e) {
        std::fprintf(stderr, "chat: %s\n", e.what());
      }
      continue;
    }
    const ChatCommand command = run_chat_command(line, a.system, messages);
    if (command == ChatCommand::Exit) break;
    if (command == ChatCommand::Done) continue;
    std::string content;
    for (size_t i = 0; i < pending; ++i) content += server::kImageMarker;
    messages.push_back({"user", content + line});
    std::string prompt;
    try {
      prompt = tmpl.apply(messages, chat);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Input) throw;
      // The template refuses this conversation (raise_exception): say why, drop the message.
      std::fprintf(stderr, "chat: %s\n", e.what());
      messages.pop_back();
      continue;
    }
    const std::vector<int32_t> all =
        encoded.empty()
            ? tok.encode(prompt, tok.add_bos(), true)
            : server::image_block_ids(prompt, encoded, tok, tok.add_bos(), image_ids.image,
                                      image_ids.start, image_ids.end, vision->block_margin());
    pending = 0;
    std::unique_ptr<ImageRows> rows;
    if (!encoded.empty())
      rows = std::make_unique<ImageRows>(all, image_ids.image, encoded, engine->cfg().n_embd,
                                         engine->cfg().n_deepstack,
                                         image_layout(*vision, engine->cfg()));
    // Reuse the longest prefix the cache already holds; feed the rest.
    size_t keep = 0;
    while (keep < in_cache.size() && keep < all.size() && in_cache[keep] == all[keep]) ++keep;
    if (keep == all.size()) --keep;  // at least one token must be fed to get logits
    session.truncate(static_cast<int64_t>(keep));
    in_cache.resize(keep);
    const std::vector<int32_t> fresh(all.begin() + static_cast<std::ptrdiff_t>(keep), all.end());
    if (session.n_past() + static_cast<int64_t>(fresh.size()) >= session.ctx()) {
      std::fprintf(stderr,
                   "chat: the conversation no longer fits the context of %lld tokens (raise -c)\n",
                   static_cast<long long>(session.ctx()));
      break;
    }
    g_interrupted.store(false);
    GenerateOptions o = options;
    o.sampling.seed += turn++;  // each answer its own draws, reproducible under -s
    o.json_vocab = json_vocab;
    o.cancel = &g_interrupted;
    o.earlier = in_cache;  // earlier turns: prompt lookup finds what the answer repeats there too
    o.shown_tokens = shown;
    o.reasoning = &markers;
    o.reasoning_budget = a.reasoning_budget;
    o.reasoning_open = prompt_opens_thinking(prompt) || harmony_open_channel(prompt) == "analysis";
    if (rows) o.prompt_inputs = rows->inputs().from(static_cast<int64_t>(keep));
    ThinkingOutput out(tmpl, prompt, a.reasoning == "show", stdout);
    const GenerateResult r =
        generate(session, tok, fresh, o, [&out](const std::string& s) { out.write(s); });
    out.finish();
    std::printf("\n");
    if (r.finish == FinishReason::Cancelled) std::fprintf(stderr, "[stopped]\n");
    in_cache.insert(in_cache.end(), fresh.begin(), fresh.end());
    // Every generated token but the last was fed back into the cache.
    if (!r.tokens.empty()) in_cache.insert(in_cache.end(), r.tokens.begin(), r.tokens.end() - 1);
    ChatMessage answer{"assistant", tmpl.thinks() || tmpl.harmony() ? out.content() : r.text};
    answer.reasoning_content = out.reasoning();
    messages.push_back(std::move(answer));
    if (a.stats) print_run_stats(*engine, r, stderr);
  }
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto* sub =
      app.add_subcommand("chat", "Interactive multi-turn chat (keeps the KV cache between turns)");
  auto a = std::make_shared<ChatArgs>();
  add_model_flags(sub, a->model, true);
  add_image_flags(sub, a->images);
  add_sampling_flags(sub, a->sampling);
  a->sampling.n_predict = 256;
  sub->add_option("--system", a->system, "System prompt");
  sub->add_option("--chat-template", a->chat_template,
                  "A FILE.jinja, or a built-in format: chatml, llama3, llama2, mistral, gemma, raw "
                  "(default: the model's own template)");
  sub->add_option("--chat-template-kwargs", a->template_kwargs,
                  "Variables for the model's template, a JSON object (e.g. '{\"enable_thinking\": "
                  "false}' turns Qwen3's thinking off)");
  sub->add_option("--reasoning", a->reasoning,
                  "A thinking model's reasoning: show (dimmed on a terminal) or hide")
      ->check(CLI::IsMember({"show", "hide"}));
  sub->add_option("--reasoning-budget", a->reasoning_budget,
                  "A thinking model's reasoning ends after N tokens (its end marker is forced); "
                  "-1: no limit")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  sub->add_flag("--stats", a->stats, "Print the stats line after each answer");
  return [a] { return run_chat(*a); };
}

}  // namespace ts::cli

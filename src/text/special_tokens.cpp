#include "text/special_tokens.h"

#include <unordered_map>

namespace ts {
namespace {

// In order of preference for eot(): a turn end before a document end.
constexpr const char* kEndOfTurn[] = {
    "<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",         "<|endoftext|>",
    "<|end_of_text|>", "<EOT>",      "_<EOT>",  "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};
constexpr const char* kEndOfMessage = "<|eom_id|>";
// Fill-in-the-middle separators end a completion too (llama.cpp: padding, repository and file
// separators); the first spelling present is taken.
constexpr const char* kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
constexpr const char* kFimRepo[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                    "<reponame>"};
constexpr const char* kFimFileSep[] = {"<|file_sep|>"};

}  // namespace

void detect_end_of_generation(TokenizerSpec& spec) {
  if (spec.types.empty()) spec.types.assign(spec.tokens.size(), TokenType::Normal);
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  const auto mark = [&](int32_t id) {
    spec.extra_eog.push_back(id);
    // A types list of the wrong length is reported by the Tokenizer constructor.
    if (static_cast<size_t>(id) < spec.types.size()) spec.types[id] = TokenType::Control;
  };
  for (const char* text : kEndOfTurn) {
    const auto it = ids.find(text);
    if (it == ids.end()) continue;
    if (spec.eot < 0) spec.eot = it->second;
    mark(it->second);
  }
  if (const auto it = ids.find(kEndOfMessage); it != ids.end()) {
    if (spec.eom < 0) spec.eom = it->second;
    mark(it->second);
  }
  const auto fim = [&](int32_t& id, const auto& spellings) {
    for (const char* text : spellings) {
      if (id >= 0) break;
      if (const auto it = ids.find(text); it != ids.end()) {
        id = it->second;
        mark(id);
      }
    }
    if (id >= 0) spec.extra_eog.push_back(id);
  };
  // gpt-oss's harmony: <|end|> ends a message, not the answer (analysis, then final, in one
  // generation); <|return|> ends the answer and <|call|> a tool call. As llama.cpp does.
  const auto ret = ids.find("<|return|>"), call = ids.find("<|call|>"), end = ids.find("<|end|>");
  if (ret != ids.end() && call != ids.end() && end != ids.end()) {
    std::erase(spec.extra_eog, end->second);
    if (spec.eot == end->second || spec.eot < 0) spec.eot = ret->second;
    if (spec.eos == end->second) spec.eos = ret->second;
    mark(ret->second);
    mark(call->second);
  }
  fim(spec.fim_pad, kFimPad);
  fim(spec.fim_repo, kFimRepo);
  fim(spec.fim_file_sep, kFimFileSep);
}

}  // namespace ts

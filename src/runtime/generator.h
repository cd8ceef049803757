// Generation: prompt through chunked prefill, then sample / decode one token at a time, text
// streamed out as it becomes complete UTF-8, until EOS/EOT, a stop string or the token limit.
// run, chat and serve all generate through this.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "text/sampler.h"

namespace ts {

class JsonSchema;
struct JsonVocabulary;
class Session;
class Tokenizer;

struct GenerateOptions {
  int64_t max_tokens = 128;  // < 0: until the context is full
  bool ignore_eos = false;
  std::vector<std::string> stop;
  SamplerParams sampling;
  // JSON mode: the text is one JSON object of this schema (JsonSchema::any_object(): any object),
  // its closing brace the end. Null: free text.
  std::shared_ptr<const JsonSchema> json;
  // The tokenizer's pieces prepared for `json` (made here when null; a chat keeps one for all its
  // turns: a sort of the whole vocabulary, DESIGN-NOTES "JSON mode").
  std::shared_ptr<const JsonVocabulary> json_vocab;
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by Ctrl-C) to stop after this token
  // Prompt lookup decoding: each forward pass also feeds up to this many tokens guessed from the
  // prompt and the answer so far (prompt_lookup.h), and a sampled token that matches the guess
  // takes the next row's logits: the same sampler draws on the logits of the same positions as
  // without it (computed as rows of one pass: equal up to rounding), fewer passes where the text
  // repeats. 0: off.
  int64_t lookup = 0;
  // The tokens the session held before this prompt (a chat's earlier turns), which prompt lookup
  // searches too; not owned.
  std::span<const int32_t> earlier;
};

enum class FinishReason { Stop, Length, Cancelled, ToolCalls };
const char* finish_reason_name(FinishReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids
  std::string text;             // what was emitted
  FinishReason finish = FinishReason::Length;
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  int64_t passes = 0;         // forward passes after the prompt's
  int64_t drafted = 0;        // tokens guessed by prompt lookup
  int64_t draft_matched = 0;  // ... that were the tokens sampled
};

// Feeds `prompt` after what the session already holds and generates. `on_text` receives each
// piece of text as soon as it is safe to show.
GenerateResult generate(Session& session, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                        const GenerateOptions& o,
                        const std::function<void(const std::string&)>& on_text);

}  // namespace ts

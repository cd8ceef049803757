// One sequence's decoding, a token at a time: sampling under the sequence's constraints (JSON
// mode; a tool call being written), the end of generation, stop strings, the answer's limits, the
// text it releases, prompt lookup's guesses and how the sequence finishes. `generate` drives one
// sequence through a Session; the server's scheduler drives one per slot, many in each forward
// pass. Drivers own the model state (what is fed, what is taken back); the decoder owns
// everything that decides the tokens, so the CLI and the server give the same answer for the same
// seed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "constrain/json_constraint.h"
#include "constrain/tool_calls.h"
#include "runtime/generator.h"
#include "text/detokenizer.h"
#include "text/reasoning_budget.h"
#include "text/sampler.h"
#include "text/stop_strings.h"

namespace ts {

class Tokenizer;

struct DecodeOptions {
  int64_t max_tokens = -1;  // < 0: until the context is full
  // Most tokens the answer may have: the context's room after the prompt (prompt and answer
  // together never exceed the context; the last token is sampled, never fed).
  int64_t room = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  SamplerParams sampling;
  std::shared_ptr<const JsonSchema> json;  // JSON mode (null: free text)
  // The tokenizer's pieces for JSON mode and tool calls (made here when null and needed).
  std::shared_ptr<const JsonVocabulary> json_vocab;
  // Chat tools (null: none), in their format (ToolSet::format). Not required: a call may start
  // after any text, at the format's opening marker; required: the prompt ends with the marker
  // and the answer is the call.
  std::shared_ptr<const ToolSet> tools;
  bool tool_required = false;
  // Control tokens shown as their text (a tool format's markers, harmony's channels); the JSON
  // vocabulary, when made here, spells them too.
  std::vector<int32_t> shown_tokens;
  // A thinking model's reasoning ends after `reasoning_budget` tokens (< 0: no limit), its end
  // marker forced (text/reasoning_budget.h); `reasoning_open`: the prompt left it reasoning.
  const ReasoningMarkers* reasoning = nullptr;
  int64_t reasoning_budget = -1;
  bool reasoning_open = false;
};

class SequenceDecoder {
 public:
  // `prompt`: the tokens before the answer, which the sampler's penalties see; prompt lookup also
  // searches `earlier` (a chat's earlier turns, held by the session before the prompt).
  SequenceDecoder(const Tokenizer& tok, DecodeOptions o, std::span<const int32_t> prompt,
                  std::span<const int32_t> earlier = {});

  // Samples from `logits` (masked and biased in place) and takes the token. False once the
  // sequence has finished (this token or an end of generation ended it); else next() is the token
  // to feed.
  bool step(std::span<float> logits);
  // Steps through the rows of a pass fed with `pass` (the token sampled before it, then guesses),
  // row `first` first, while the token sampled is the next row's guess. Returns the last row
  // whose logits were used: the rows after it hold guesses not taken. `on_token` runs after each
  // taken token (the text it released is in take_text()).
  template <class OnToken>
  size_t verify(float* logits, size_t vocab, std::span<const int32_t> pass, size_t first,
                const OnToken& on_token) {
    size_t row = first;
    for (;;) {
      const bool more = step(std::span<float>(logits + row * vocab, vocab));
      if (taken_) on_token(std::span<const float>(logits + row * vocab, vocab));
      if (!more || row + 1 >= pass.size() || next_ != pass[row + 1]) return row;
      ++row;
      ++draft_matched_;
    }
  }

  // Prompt lookup: up to `most` tokens guessed to follow next(), from the context and the answer
  // (prompt_lookup.h), no more than the answer's limits leave room for (a guess becomes an answer
  // token only with a row after it).
  std::vector<int32_t> draft(int64_t most);

  // Ends the sequence from outside (a cancel, a full context): `reason` unless it already ended.
  void finish(FinishReason reason);

  bool done() const { return done_; }
  FinishReason finish_reason() const { return finish_; }
  int32_t next() const { return next_; }
  // Whether the last step took its token (an end of generation is not taken).
  bool taken() const { return taken_; }
  int64_t generated() const { return static_cast<int64_t>(answer_.size()); }
  const std::vector<int32_t>& answer() const { return answer_; }
  int64_t drafted() const { return drafted_; }
  int64_t draft_matched() const { return draft_matched_; }
  // Text released since the last call (complete UTF-8, short of a possible stop string).
  std::string take_text();
  // The calls written, once finished with ToolCalls (or Length inside a call: the whole ones).
  std::vector<ToolCall> tool_calls() const;

 private:
  int64_t limit() const;  // the most tokens the answer may have
  void end(FinishReason reason);
  bool start_tool_call(const std::string& after);

  const Tokenizer& tok_;
  DecodeOptions o_;
  std::vector<int32_t> history_;  // earlier turns, prompt, answer: what prompt lookup searches
  std::vector<int32_t> answer_;
  Sampler sampler_;
  TextStream text_;
  StopStrings stops_;
  std::optional<JsonConstraint> json_;
  std::optional<ToolCallConstraint> tool_;  // while a tool call is being written
  bool calling_ = false;                    // ... in a format not constrained (only read)
  std::string call_text_;                   // ... its bytes so far
  std::vector<ToolCall> calls_;             // read from it when the sequence ended
  ReasoningBudget budget_;
  std::string released_;
  int32_t next_ = -1;
  bool taken_ = false;
  bool done_ = false;
  FinishReason finish_ = FinishReason::Length;
  int64_t drafted_ = 0;
  int64_t draft_matched_ = 0;
};

}  // namespace ts

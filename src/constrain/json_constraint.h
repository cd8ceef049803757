// Constrained JSON: a row of logits masked to the tokens whose bytes can continue one JSON object
// satisfying a schema (SchemaPrefix; JsonSchema::any_object() for plain JSON mode) or one tool
// call (ToolCallPrefix), then the chosen token followed. The vocabulary's pieces are prepared once
// per tokenizer (JsonVocabulary, from each token's text: text/constraint_vocabulary.h builds it
// from a Tokenizer) and shared by every constrained generation over it. Tokens that
// add no text (control tokens, end of generation among them) are never allowed: the object's
// closing brace ends the generation instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/json_schema.h"
#include "constrain/schema_prefix.h"
#include "constrain/tool_calls.h"

namespace ts {

struct JsonVocabulary {
  // `token_pieces`: each token's bytes in generated text, by id ("" for one that adds none);
  // `eog_ids`: the end-of-generation tokens.
  JsonVocabulary(std::vector<std::string> token_pieces, std::vector<int32_t> eog_ids);

  // Tokens in byte order of their pieces, and how many leading bytes each shares with the one
  // before it: a trie walked as an array (JsonConstraint::mask).
  struct Sorted {
    std::vector<int32_t> ids;
    std::vector<uint32_t> shared;
  };

  std::vector<std::string> pieces;  // each token's bytes in generated text
  // 1: the token continues any string between characters (non-empty, whole UTF-8 characters, no
  // '"', '\' or control byte): most of a vocabulary, allowed there without a walk.
  std::vector<uint8_t> plain;
  std::vector<uint32_t> chars;  // code points of each piece (for a string's maxLength)
  Sorted all;                   // every token with a non-empty piece
  Sorted not_plain;             // those of them that are not plain
  size_t longest = 0;           // bytes of the longest piece
  std::vector<int32_t> eog;     // end-of-generation tokens: allowed where the text may end
};

// Masks to what `Recognizer` (built over `Rules`) accepts next: SchemaPrefix over a JsonSchema
// (JSON mode, structured outputs), ToolCallPrefix over a ToolSet (a tool call).
template <class Recognizer, class Rules>
class PrefixConstraint {
 public:
  PrefixConstraint(std::shared_ptr<const JsonVocabulary> vocab, std::shared_ptr<const Rules> rules);

  // Sets every logit whose token cannot continue the text to -inf (logits past the tokenizer's
  // vocabulary too); end-of-generation tokens are allowed only where the text is complete (where
  // more may also follow: between parallel tool calls). An Input error when no token can (a
  // vocabulary without the characters).
  void mask(std::span<float> logits);
  // Follows a generated token; a Runtime error when it cannot continue the text.
  void advance(int32_t token);
  // Follows text that is not a token (what followed a tool call's marker in the marker's token);
  // false, and nothing changes, when it cannot continue.
  bool advance_text(std::string_view bytes) { return state_.feed_all(bytes); }
  bool complete() const { return state_.complete(); }
  const Recognizer& state() const { return state_; }

 private:
  void walk(const JsonVocabulary::Sorted& sorted);

  std::shared_ptr<const JsonVocabulary> vocab_;
  std::shared_ptr<const Rules> rules_;
  Recognizer state_;
  // mask()'s scratch: the tokens it allows, and the states after each byte of the current piece.
  std::vector<uint8_t> allowed_;
  std::vector<Recognizer> states_;
};

using JsonConstraint = PrefixConstraint<SchemaPrefix, JsonSchema>;
using ToolCallConstraint = PrefixConstraint<ToolCallPrefix, ToolSet>;
extern template class PrefixConstraint<SchemaPrefix, JsonSchema>;
extern template class PrefixConstraint<ToolCallPrefix, ToolSet>;

}  // namespace ts

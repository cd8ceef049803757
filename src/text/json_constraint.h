// JSON mode: a row of logits masked to the tokens whose bytes can continue one JSON object
// satisfying a schema (SchemaPrefix; JsonSchema::any_object() for plain JSON mode), then the
// chosen token followed. The vocabulary's pieces are prepared once per
// tokenizer (JsonVocabulary) and shared by every constrained generation over it. Tokens that add
// no text (control tokens, end of generation among them) are never allowed: the object's closing
// brace ends the generation instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "text/json_schema.h"
#include "text/schema_prefix.h"

namespace ts {

class Tokenizer;

struct JsonVocabulary {
  explicit JsonVocabulary(const Tokenizer& tok);

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
};

class JsonConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonVocabulary> vocab,
                 std::shared_ptr<const JsonSchema> schema);

  // Sets every logit whose token cannot continue the object to -inf (logits past the tokenizer's
  // vocabulary too). An Input error when no token can (a vocabulary without the characters).
  void mask(std::span<float> logits);
  // Follows a generated token; a Runtime error when it cannot continue the object.
  void advance(int32_t token);
  bool complete() const { return json_.complete(); }

 private:
  void walk(const JsonVocabulary::Sorted& sorted);

  std::shared_ptr<const JsonVocabulary> vocab_;
  std::shared_ptr<const JsonSchema> schema_;
  SchemaPrefix json_;
  // mask()'s scratch: the tokens it allows, and the states after each byte of the current piece.
  std::vector<uint8_t> allowed_;
  std::vector<SchemaPrefix> states_;
};

}  // namespace ts

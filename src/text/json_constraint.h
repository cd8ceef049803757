// JSON mode: a row of logits masked to the tokens whose bytes can continue one JSON object
// (JsonPrefix), then the chosen token followed. The vocabulary's pieces are prepared once per
// tokenizer (JsonVocabulary) and shared by every constrained generation over it. Tokens that add
// no text (control tokens, end of generation among them) are never allowed: the object's closing
// brace ends the generation instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "text/json_prefix.h"

namespace ts {

class Tokenizer;

struct JsonVocabulary {
  explicit JsonVocabulary(const Tokenizer& tok);
  std::vector<std::string> pieces;  // each token's bytes in generated text
  // The token continues any string between characters: non-empty, whole UTF-8 characters, no
  // '"', '\' or control byte (most of a vocabulary; the mask skips simulating these there).
  std::vector<bool> plain;
};

class JsonConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<const JsonVocabulary> vocab);

  // Sets every logit whose token cannot continue the object to -inf (logits past the tokenizer's
  // vocabulary too). An Input error when no token can (a vocabulary without the characters).
  void mask(std::span<float> logits) const;
  // Follows a generated token; a Runtime error when it cannot continue the object.
  void advance(int32_t token);
  bool complete() const { return json_.complete(); }

 private:
  bool allowed(size_t id) const;

  std::shared_ptr<const JsonVocabulary> vocab_;
  JsonPrefix json_;
};

}  // namespace ts

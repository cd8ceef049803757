#include "text/json_constraint.h"

#include <cmath>
#include <utility>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace ts {
namespace {

bool continues_any_string(const std::string& piece) {
  if (piece.empty() || utf8_first_invalid(piece) != std::string::npos) return false;
  for (char ch : piece) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == '"' || c == '\\' || c < 0x20) return false;
  }
  return true;
}

}  // namespace

JsonVocabulary::JsonVocabulary(const Tokenizer& tok) {
  const auto n = static_cast<size_t>(tok.vocab_size());
  pieces.reserve(n);
  plain.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    pieces.push_back(tok.token_to_piece(static_cast<int32_t>(id), false));
    plain.push_back(continues_any_string(pieces.back()));
  }
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonVocabulary> vocab)
    : vocab_(std::move(vocab)) {}

bool JsonConstraint::allowed(size_t id) const {
  if (id >= vocab_->pieces.size()) return false;
  const std::string& piece = vocab_->pieces[id];
  if (piece.empty()) return false;
  if (json_.in_plain_string() && vocab_->plain[id]) return true;
  return json_.accepts(piece);
}

void JsonConstraint::mask(std::span<float> logits) const {
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (allowed(id)) {
      any = true;
    } else {
      logits[id] = -INFINITY;
    }
  }
  if (!any)
    fail(ErrorKind::Input, "JSON mode: no token of this vocabulary can continue the object");
}

void JsonConstraint::advance(int32_t token) {
  if (token < 0 || !allowed(static_cast<size_t>(token)) ||
      !json_.feed_all(vocab_->pieces[static_cast<size_t>(token)]))
    fail(ErrorKind::Runtime,
         "JSON mode: token " + std::to_string(token) + " cannot continue the object");
}

}  // namespace ts

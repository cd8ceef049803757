// The vocabulary a constrained generation masks over (constrain/json_constraint.h), read from a
// tokenizer: constrain/ sits below text/ and never sees a Tokenizer, only each token's text.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "constrain/json_constraint.h"

namespace ts {

class Tokenizer;

// `shown`: control tokens whose text is part of the generated text (TextStream's `shown`): a
// tool-call format's markers, which its envelope spells.
std::shared_ptr<const JsonVocabulary> json_vocabulary(const Tokenizer& tok,
                                                      const std::vector<int32_t>& shown = {});

}  // namespace ts

#include "text/constraint_vocabulary.h"

#include <algorithm>
#include <string>
#include <utility>

#include "text/tokenizer.h"

namespace ts {

std::shared_ptr<const JsonVocabulary> json_vocabulary(const Tokenizer& tok,
                                                      const std::vector<int32_t>& shown) {
  std::vector<std::string> pieces(static_cast<size_t>(tok.vocab_size()));
  for (size_t id = 0; id < pieces.size(); ++id) {
    const bool show =
        std::find(shown.begin(), shown.end(), static_cast<int32_t>(id)) != shown.end();
    pieces[id] = tok.token_to_piece(static_cast<int32_t>(id), show);
  }
  return std::make_shared<const JsonVocabulary>(std::move(pieces), tok.eog_ids());
}

}  // namespace ts

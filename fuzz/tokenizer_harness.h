// What one tokenizer fuzz input does: it becomes a model directory's (a ScratchDir's)
// tokenizer.model (a SentencePiece ModelProto, parsed by hand) or tokenizer.json, which
// Tokenizer::from_hf_dir either refuses with a one-line ts::Error (the check returns false) or
// accepts (true); an accepted tokenizer must then encode a fixed text into ids of its vocabulary
// (or refuse the text with a one-line Input error, when the vocabulary lacks one of its characters
// and has no unknown token) and decode them, and render each of its first tokens, without any other
// exception. Shared by the libFuzzer targets and the replay test (tests/unit/test_fuzz_replay.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parser_harness.h"
#include "text/tokenizer.h"

namespace ts::fuzz {

inline bool check_tokenizer(const std::string& dir) {
  std::unique_ptr<Tokenizer> t;
  try {
    t = std::make_unique<Tokenizer>(Tokenizer::from_hf_dir(dir));
  } catch (const Error& e) {
    return refused(e);
  }
  // Spaces, digits, punctuation, multi-byte characters and special-looking markup.
  static const std::string kText =
      " Hello,  world! 123 4567 <s></s><|im_start|>user\n\tcafé 日本語 🙂 \xe2\x96\x81x ";
  for (const bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = t->encode(kText, false, special);
    } catch (const Error& e) {
      // A vocabulary may lack a character the text needs, with no unknown token to stand for
      // it: the text is refused (an Input error), the tokenizer stays usable for others.
      if (e.kind() != ErrorKind::Input ||
          std::string_view(e.what()).find('\n') != std::string_view::npos)
        violated(std::string("encode refused the text with: ") + e.what());
      continue;
    }
    for (const int32_t id : ids)
      if (id < 0 || id >= t->vocab_size()) violated("encode gave id " + std::to_string(id));
    t->decode(ids, special);
  }
  for (int32_t id = 0; id < std::min<int32_t>(t->vocab_size(), 512); ++id) t->token_to_piece(id);
  return true;
}

}  // namespace ts::fuzz

// Streaming detokenizer: turns generated token ids into text as they arrive. A token can end in
// the middle of a UTF-8 character (byte-fallback pieces, byte-level BPE), so bytes are held until
// the character is complete; what is emitted is always valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts {

class Tokenizer;

class TextStream {
 public:
  // render_special: control tokens (e.g. "<|im_end|>") are shown as their text; `shown`: these
  // control tokens are (a tool-call format's markers, ToolFormat::preserved_tokens).
  explicit TextStream(const Tokenizer& tokenizer, bool render_special = false,
                      std::vector<int32_t> shown = {});

  // The text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Ends the stream: an unfinished character comes out as one U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  // Sorted.
  std::vector<int32_t> shown_;
  std::string pending_;  // bytes of an incomplete character
};

// Appends the complete characters at the front of `bytes` to `out` and returns how many bytes
// were consumed; an incomplete sequence at the very end is left, a malformed one becomes U+FFFD.
size_t take_complete_utf8(const std::string& bytes, std::string& out);

}  // namespace ts

// UTF-8 helpers shared by the tokenizers and the streaming decoder. Text from a user or a model
// file is bytes; everything that splits it by character goes through these checked functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ts {

// Length of the sequence a lead byte announces (1..4), or 0 for a byte that cannot start one.
int utf8_sequence_length(uint8_t lead);

// Length of the valid sequence starting at text[pos], or 0 when the bytes there are not one
// complete, well-formed sequence (truncated, overlong, surrogate, beyond U+10FFFF).
size_t utf8_valid_prefix(std::string_view text, size_t pos);

// The bytes of the character at text[pos]: its valid sequence, or 1 (a byte of invalid text
// taken alone), for walking text that may hold invalid bytes.
size_t utf8_char_length(std::string_view text, size_t pos);

// Byte offset of the first invalid sequence, or std::string_view::npos when all is valid.
size_t utf8_first_invalid(std::string_view text);

// Decodes the valid sequence at text[pos] (the caller has checked it with utf8_valid_prefix).
uint32_t utf8_decode_at(std::string_view text, size_t pos, size_t len);

void utf8_append(std::string& out, uint32_t cp);

}  // namespace ts

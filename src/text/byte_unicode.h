// The byte-level BPE alphabet (GPT-2's bytes_to_unicode): every byte is written as one printable
// code point so that vocabularies and merges can be stored as text. Printable Latin-1 bytes map
// to themselves; the other 68 bytes map to U+0100.. in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ts {

// The byte-level spelling of raw bytes (each byte becomes one code point, 1 or 2 UTF-8 bytes).
std::string bytes_to_byte_level(std::string_view raw);

// The raw bytes a byte-level spelling stands for. A code point outside the alphabet (possible in
// hand-made vocabularies) is kept as its own UTF-8 bytes, so decoding never drops text.
std::string byte_level_to_bytes(std::string_view text);

}  // namespace ts

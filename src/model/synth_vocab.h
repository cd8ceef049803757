// The vocabulary of a synthetic model: a SentencePiece-style `tokenizer.ggml.*` set (model
// "llama") of exactly the shape's size, so that the file is complete for any GGUF reader.
#pragma once

#include <cstdint>

namespace ts {

class GgufWriter;

// Ids 0..2 are <unk>, <s>, </s>; ids 3..258 the byte tokens <0x00>..<0xFF>; the rest distinct
// letter pieces (half of them word-initial, with SentencePiece's U+2581 prefix) scored in id
// order. `vocab` must be at least 259 + 26.
void add_synth_vocab(GgufWriter& w, int64_t vocab);

}  // namespace ts

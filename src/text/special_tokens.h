// End-of-generation tokens that files do not name. Chat models end a turn with a token such as
// <|im_end|> or <end_of_turn> while their metadata often names only the end-of-text EOS; like
// llama.cpp we recognise the well-known spellings, so generation stops where the model meant.
#pragma once

#include "text/tokenizer.h"

namespace ts {

// Sets spec.eot / spec.eom and the fill-in-the-middle ids when unset and a known spelling
// exists, adds every known end-of-turn spelling and the FIM separators to spec.extra_eog, and
// types the tokens found by spelling Control (some converters mark them Normal, which would let
// "<|im_end|>" in user text become the real token).
void detect_end_of_generation(TokenizerSpec& spec);

}  // namespace ts

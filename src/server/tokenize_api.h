// llama.cpp's server's token endpoints, which clients use to count and inspect tokens:
//   POST /tokenize   {"content": TEXT, "add_special": false, "with_pieces": false}
//                    -> {"tokens": [ID, ...]} or, with pieces, [{"id": ID, "piece": TEXT}, ...]
//                    (a piece that is not whole UTF-8 is given as its byte values)
//   POST /detokenize {"tokens": [ID, ...]} -> {"content": TEXT}
// Control tokens written in the content are read as their ids (as llama.cpp does here); add_special
// adds BOS when the model wants it. A malformed body is an Input error naming the field (a 400).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "text/tokenizer.h"

namespace ts::server {

nlohmann::json tokenize_response(const Tokenizer& tok, const nlohmann::json& body);
nlohmann::json detokenize_response(const Tokenizer& tok, const nlohmann::json& body);

}  // namespace ts::server

#include "server/tokenize_api.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "server/json_fields.h"

namespace ts::server {

using nlohmann::json;

json tokenize_response(const Tokenizer& tok, const json& body) {
  const auto content = body.find("content");
  if (content == body.end() || !content->is_string()) bad("content", "must be a string");
  const bool bos = boolean(body, "add_special", false) && tok.add_bos();
  const std::vector<int32_t> ids = tok.encode(content->get<std::string>(), bos, true);
  if (!boolean(body, "with_pieces", false)) return {{"tokens", ids}};
  json tokens = json::array();
  for (int32_t id : ids) {
    const std::string piece = tok.token_to_piece(id, true);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(c);
    tokens.push_back(
        {{"id", id},
         {"piece", utf8_first_invalid(piece) == std::string::npos ? json(piece) : bytes}});
  }
  return {{"tokens", tokens}};
}

json detokenize_response(const Tokenizer& tok, const json& body) {
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) bad("tokens", "must be a list of token ids");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.vocab_size())
      bad("tokens", "must hold token ids below the vocabulary size " +
                        std::to_string(tok.vocab_size()) + ", got " + t.dump());
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return {{"content", tok.decode(ids, true)}};
}

}  // namespace ts::server

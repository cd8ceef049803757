#include "server/embedding_inputs.h"

#include <nlohmann/json.hpp>

#include "runtime/embedding.h"
#include "server/json_fields.h"

namespace ts::server {
namespace {

using nlohmann::json;

std::vector<int32_t> text_tokens(const Tokenizer& tok, const json& v, const std::string& name) {
  const std::string text = v.get<std::string>();
  if (text.empty()) bad(name, "is an empty string");
  return embedding_tokens(tok, text);
}

std::vector<int32_t> id_tokens(const Tokenizer& tok, const json& v, const std::string& name) {
  if (v.empty()) bad(name, "is an empty list of token ids");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer())
      bad(name, "must hold token ids (integers), got " + t.dump().substr(0, 40));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= tok.vocab_size())
      bad(name, "holds token id " + std::to_string(id) + ", outside the vocabulary of " +
                    std::to_string(tok.vocab_size()));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

std::vector<std::vector<int32_t>> embedding_inputs(const Tokenizer& tok, const json& value,
                                                   const EmbeddingInputRules& r) {
  const std::string field = r.field;
  const std::string kinds = r.token_ids ? "a string, a list of strings, a list of token ids or a "
                                          "list of lists of token ids"
                                        : "a string or a list of strings";
  std::vector<std::vector<int32_t>> out;
  if (value.is_string()) {
    out.push_back(text_tokens(tok, value, field));
  } else if (!value.is_array()) {
    bad(field, "must be " + kinds);
  } else if (value.empty()) {
    bad(field, "is an empty list");
  } else if (value.size() > kMaxEmbeddingInputs) {
    bad(field, "holds " + std::to_string(value.size()) + " inputs, more than the " +
                   std::to_string(kMaxEmbeddingInputs) + " one request may hold");
  } else if (r.token_ids && value.front().is_number()) {
    out.push_back(id_tokens(tok, value, field));
  } else {
    for (size_t i = 0; i < value.size(); ++i) {
      const json& v = value[i];
      const std::string name = field + "[" + std::to_string(i) + "]";
      if (v.is_string())
        out.push_back(text_tokens(tok, v, name));
      else if (r.token_ids && v.is_array())
        out.push_back(id_tokens(tok, v, name));
      else
        bad(name, r.token_ids ? "must be a string or a list of token ids" : "must be a string");
    }
  }
  if (r.truncate > 0)
    for (std::vector<int32_t>& ids : out)
      if (static_cast<int64_t>(ids.size()) > r.truncate)
        ids.resize(static_cast<size_t>(r.truncate));
  return out;
}

}  // namespace ts::server

#include "text/hf_unigram.h"

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"

namespace ts {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

// node[key] when it is a string, `fallback` when absent; another type is refused naming it.
std::string string_at(const json& node, const char* key, const std::string& fallback,
                      const std::string& where) {
  if (!node.is_object() || !node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_string())
    fail(ErrorKind::Model, where + ": " + key + " is " + node[key].dump() + ", not a string");
  return node[key].get<std::string>();
}

std::string type_of(const json& node) {
  return node.is_object() ? string_at(node, "type", "?", "tokenizer.json") : "none";
}

// A Sequence's members, or the node itself.
std::vector<json> steps(const json& node, const char* list) {
  if (node.is_null()) return {};
  if (type_of(node) == "Sequence") {
    if (!node.contains(list) || !node[list].is_array()) return {};
    return node[list].get<std::vector<json>>();
  }
  return {node};
}

bool flag(const json& node, const char* key, bool fallback) {
  return node.contains(key) && node[key].is_boolean() ? node[key].get<bool>() : fallback;
}

void read_normalizer(const json& norm, const std::string& path, TokenizerSpec& s,
                     UnigramHfSteps& h) {
  const std::vector<json> list = steps(norm, "normalizers");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& n = list[i];
    const std::string type = type_of(n);
    if (type == "Precompiled" && i == 0) {
      // transformers writes null for a SentencePiece model without rules (its identity).
      const std::string where = path + ": normalizer Precompiled";
      const std::string b64 = string_at(n, "precompiled_charsmap", "", where);
      if (!b64.empty())
        s.charsmap = base64_decode(b64, ErrorKind::Model, where + "'s precompiled_charsmap");
    } else if (type == "Strip") {
      h.strip_left |= flag(n, "strip_left", false);
      h.strip_right |= flag(n, "strip_right", false);
    } else if (type == "Replace") {
      const json pattern = n.contains("pattern") ? n["pattern"] : json();
      const std::string content = string_at(n, "content", "", path + ": normalizer Replace");
      const bool runs =
          string_at(pattern, "Regex", "", path + ": normalizer Replace pattern") == " {2,}";
      if (!runs || (content != " " && content != kSpaceMarker))
        fail(ErrorKind::Unsupported,
             path + ": normalizer Replace of " + pattern.dump() + " by '" + content +
                 "' is not supported with Unigram (only runs of spaces, \" {2,}\", to one)");
      h.collapse_spaces = true;
    } else {
      fail(ErrorKind::Unsupported,
           path + ": normalizer '" + type +
               "' is not supported with Unigram (Precompiled first, Strip, Replace \" {2,}\")");
    }
  }
}

void read_pre_tokenizer(const json& pre, const std::string& path, UnigramHfSteps& h) {
  bool metaspace = false;
  for (const json& p : steps(pre, "pretokenizers")) {
    const std::string type = type_of(p);
    if (type == "WhitespaceSplit" && !metaspace) {
      h.whitespace_split = true;
    } else if (type == "Metaspace" && !metaspace) {
      metaspace = true;
      const std::string where = path + ": pre_tokenizer Metaspace";
      const std::string replacement = string_at(p, "replacement", std::string(kSpaceMarker), where);
      if (replacement != kSpaceMarker)
        fail(ErrorKind::Unsupported,
             where + " replacement '" + replacement + "' is not supported (only U+2581)");
      // tokenizers before 0.15 wrote add_prefix_space; later ones prepend_scheme.
      const std::string scheme = string_at(
          p, "prepend_scheme", flag(p, "add_prefix_space", true) ? "always" : "never", where);
      if (scheme != "always" && scheme != "never")
        fail(ErrorKind::Unsupported, path + ": pre_tokenizer Metaspace prepend_scheme '" + scheme +
                                         "' is not supported (always, never)");
      h.prepend = scheme == "always";
      h.split = flag(p, "split", true);
    } else {
      fail(ErrorKind::Unsupported,
           path + ": pre_tokenizer '" + type +
               "' is not supported with Unigram (WhitespaceSplit, then Metaspace)");
    }
  }
  if (!metaspace)
    fail(ErrorKind::Unsupported, path + ": a Unigram pre_tokenizer without Metaspace ('" +
                                     type_of(pre) + "') is not supported");
}

}  // namespace

TokenizerSpec hf_unigram_spec(const json& j, const std::string& path) {
  const json& model = j["model"];
  TokenizerSpec s;
  s.kind = TokenizerKind::Unigram;
  s.source = path;
  if (!model.contains("vocab") || !model["vocab"].is_array())
    fail(ErrorKind::Model, path + ": model.vocab is not a list of [piece, score]");
  for (const json& e : model["vocab"]) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      fail(ErrorKind::Model, path + ": model.vocab entry " + std::to_string(s.tokens.size()) +
                                 " is not [piece, score]");
    s.tokens.push_back(e[0].get<std::string>());
    s.scores.push_back(e[1].get<float>());
  }
  s.types.assign(s.tokens.size(), TokenType::Normal);
  if (flag(model, "byte_fallback", false))
    fail(ErrorKind::Unsupported, path + ": model.byte_fallback is not supported with Unigram");
  const json unk = model.value("unk_id", json());
  if (!unk.is_number_integer() || unk.get<int64_t>() < 0 ||
      unk.get<int64_t>() >= static_cast<int64_t>(s.tokens.size()))
    fail(ErrorKind::Model, path + ": model.unk_id " + unk.dump() + " is not a token id");
  s.unk = static_cast<int32_t>(unk.get<int64_t>());
  s.types[static_cast<size_t>(s.unk)] = TokenType::Unknown;

  UnigramHfSteps h;
  read_normalizer(j.contains("normalizer") ? j["normalizer"] : json(), path, s, h);
  read_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), path, h);
  s.hf_steps = h;
  s.add_space_prefix = h.prepend;  // decode drops the prefix marker before the first word
  return s;
}

}  // namespace ts

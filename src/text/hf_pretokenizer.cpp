#include "text/hf_pretokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ts {
namespace {

using json = nlohmann::json;

// The regex the ByteLevel pre-tokenizer applies when use_regex is true (GPT-2's).
constexpr const char* kByteLevelRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string quote_literal(const std::string& s) {
  std::string out = "\\Q";
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "\\E") == 0) {  // \E would end the quote early
      out += "\\E\\\\E\\Q";
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out + "\\E";
}

void translate(const json& node, const std::string& path, std::vector<std::string>& out) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  if (type == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      fail(ErrorKind::Model, path + ": pre_tokenizer Sequence without pretokenizers");
    for (const json& c : node["pretokenizers"]) translate(c, path, out);
  } else if (type == "ByteLevel") {
    if (node.value("add_prefix_space", false))
      fail(ErrorKind::Unsupported,
           path + ": ByteLevel pre-tokenizer with add_prefix_space is not supported");
    if (node.value("use_regex", true)) out.push_back(kByteLevelRegex);
  } else if (type == "Digits") {
    out.push_back(node.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else if (type == "Split") {
    if (node.value("behavior", "") != "Isolated" || node.value("invert", false))
      fail(ErrorKind::Unsupported, path + ": Split pre-tokenizer with behavior '" +
                                       node.value("behavior", "?") +
                                       "' / invert is not supported (only Isolated)");
    const json& pat = node.contains("pattern") ? node["pattern"] : json();
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      out.push_back(pat["Regex"].get<std::string>());
    } else if (pat.contains("String") && pat["String"].is_string()) {
      out.push_back(quote_literal(pat["String"].get<std::string>()));
    } else {
      fail(ErrorKind::Model, path + ": Split pre-tokenizer without a Regex or String pattern");
    }
  } else {
    fail(ErrorKind::Unsupported,
         path + ": pre-tokenizer '" + type + "' is not supported for byte-level BPE");
  }
}

}  // namespace

std::vector<std::string> hf_pretokenizer_patterns(const json& pre, const std::string& path) {
  std::vector<std::string> out;
  translate(pre, path, out);
  return out;
}

}  // namespace ts

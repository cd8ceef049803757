// The vocabulary half of convert_vocab.h: tokens, types and scores from tokenizer.model
// (_set_vocab_sentencepiece), or tokens, types and the pre-tokenizer's name from tokenizer.json
// (_set_vocab_gpt2).
#include "text/convert_vocab.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/json_nesting.h"
#include "formats/gguf_writer.h"
#include "text/hf_pretokenizer.h"
#include "text/pretokenizer.h"
#include "text/sentencepiece_model.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// U+2581 (SentencePiece's space) as a space: user-defined tokens are stored pre-normalised.
std::string unescape_spaces(const std::string& s) {
  const std::string_view mark = "\xE2\x96\x81";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (std::string_view(s).substr(i, mark.size()) == mark) {
      out += ' ';
      i += mark.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
};

GgufValue strings(std::vector<std::string> v) {
  GgufArray a;
  a.elem = GgufType::String;
  a.strings = std::move(v);
  return gguf_array(std::move(a));
}

GgufValue floats(std::vector<double> v) {
  GgufArray a;
  a.elem = GgufType::F32;
  a.floats = std::move(v);
  return gguf_array(std::move(a));
}

GgufValue ints(GgufType t, std::vector<int64_t> v) {
  GgufArray a;
  a.elem = t;
  a.ints = std::move(v);
  return gguf_array(std::move(a));
}

// tokenizer.ggml.model, pre "default" and a scored vocabulary, as _set_vocab_sentencepiece and
// _xlmroberta_set_vocab write them; the vocabulary's size.
int64_t add_scored_vocab(const char* model, Vocab v, GgufKeyValues& out) {
  const auto n = static_cast<int64_t>(v.tokens.size());
  out.emplace_back("tokenizer.ggml.model", gguf_string(model));
  out.emplace_back("tokenizer.ggml.pre", gguf_string("default"));
  out.emplace_back("tokenizer.ggml.tokens", strings(std::move(v.tokens)));
  out.emplace_back("tokenizer.ggml.scores", floats(std::move(v.scores)));
  out.emplace_back("tokenizer.ggml.token_type", ints(GgufType::I32, std::move(v.types)));
  return n;
}

// DIR/tokenizer.json, checked to be a `type` model with a vocabulary.
json tokenizer_json(const std::string& dir, const std::string& type) {
  const std::string path = dir + "/tokenizer.json";
  if (!fs::is_regular_file(path)) fail(ErrorKind::Model, dir + ": no tokenizer.json");
  const json tok = parse_json_file(path);
  if (!tok.is_object() || !tok.contains("model") || tok["model"].value("type", "") != type ||
      !tok["model"].contains("vocab") || !tok["model"]["vocab"].is_object())
    fail(ErrorKind::Unsupported,
         path + ": not a " + type + " tokenizer (model.type " + type + " with a vocab)");
  return tok;
}

// `size` ids: the model's pieces, then "[PADi]" (unused, score -10000).
Vocab sentencepiece_pieces(const SentencePieceModel& m, size_t size) {
  Vocab v;
  for (size_t i = 0; i < size; ++i) v.tokens.push_back("[PAD" + std::to_string(i) + "]");
  v.scores.assign(size, -10000.0);
  v.types.assign(size, static_cast<int64_t>(TokenType::Unused));
  for (size_t i = 0; i < m.pieces.size() && i < size; ++i) {
    const SentencePieceModel::Piece& p = m.pieces[i];
    // The converter asks IsUnknown / IsControl / IsUnused / IsByte: a user-defined piece is normal.
    const auto t = static_cast<TokenType>(p.type);
    const bool kept = t == TokenType::Unknown || t == TokenType::Control ||
                      t == TokenType::Unused || t == TokenType::Byte;
    v.tokens[i] = p.text;
    v.scores[i] = p.score;
    v.types[i] = static_cast<int64_t>(kept ? t : TokenType::Normal);
  }
  return v;
}

// _xlmroberta_set_vocab of sentencepiece.bpe.model: as many ids as the config's vocab_size or
// the model's pieces, in fairseq's order (<s> <pad> </s> <unk>, then the pieces from the 4th
// on, one id later), the last id dropped as the converter's realignment drops it.
Vocab xlm_roberta_pieces(const SentencePieceModel& m, int64_t n_vocab) {
  const size_t size = std::max(static_cast<size_t>(std::max<int64_t>(n_vocab, 0)), m.pieces.size());
  if (size < 4) fail(ErrorKind::Model, "sentencepiece.bpe.model has fewer than 4 pieces");
  const Vocab all = sentencepiece_pieces(m, size);
  const auto control = static_cast<int64_t>(TokenType::Control);
  Vocab v{{"<s>", "<pad>", "</s>", "<unk>"},
          {0.0, 0.0, 0.0, 0.0},
          {control, control, control, static_cast<int64_t>(TokenType::Unknown)}};
  v.tokens.insert(v.tokens.end(), all.tokens.begin() + 3, all.tokens.end() - 1);
  v.scores.insert(v.scores.end(), all.scores.begin() + 3, all.scores.end() - 1);
  v.types.insert(v.types.end(), all.types.begin() + 3, all.types.end() - 1);
  return v;
}

// _xlmroberta_set_vocab's keys into `out` (the vocabulary, its whitespace flags and charsmap);
// SpecialVocab's keys returned.
GgufKeyValues xlm_roberta_vocab(const std::string& dir, const VocabRules& rules,
                                GgufKeyValues& out) {
  const std::string path = dir + "/sentencepiece.bpe.model";
  if (!fs::is_regular_file(path))
    fail(ErrorKind::Unsupported,
         dir +
             ": an XLM-R tokenizer without sentencepiece.bpe.model is not converted (the "
             "converter reads tokenizer.json through transformers then)");
  const SentencePieceModel m = read_sentencepiece_model(path);
  if (m.model_type != 1)
    fail(ErrorKind::Unsupported,
         path + ": model_type " + std::to_string(m.model_type) + " is not XLM-R's Unigram (1)");
  const int64_t n = add_scored_vocab("t5", xlm_roberta_pieces(m, rules.n_vocab), out);
  out.emplace_back("tokenizer.ggml.add_space_prefix",
                   gguf_int(GgufType::Bool, m.add_dummy_prefix ? 1 : 0));
  out.emplace_back("tokenizer.ggml.token_type_count",
                   gguf_int(GgufType::U32, rules.token_type_count));
  out.emplace_back("tokenizer.ggml.remove_extra_whitespaces",
                   gguf_int(GgufType::Bool, m.remove_extra_whitespaces ? 1 : 0));
  if (!m.precompiled_charsmap.empty()) {
    std::vector<int64_t> bytes;
    for (const unsigned char b : m.precompiled_charsmap) bytes.push_back(b);
    out.emplace_back("tokenizer.ggml.precompiled_charsmap", ints(GgufType::U8, std::move(bytes)));
  }
  return special_vocab_keys(dir, false, n, rules.special);
}

Vocab sentencepiece_vocab(const std::string& dir, int64_t n_vocab) {
  const SentencePieceModel m = read_sentencepiece_model(dir + "/tokenizer.model");
  const auto size =
      static_cast<size_t>(n_vocab > 0 ? n_vocab : static_cast<int64_t>(m.pieces.size()));
  Vocab v = sentencepiece_pieces(m, size);
  if (fs::is_regular_file(dir + "/added_tokens.json")) {
    const json added = parse_json_file(dir + "/added_tokens.json");
    for (const auto& [text, id] : added.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<size_t>() >= size) continue;
      v.tokens[id.get<size_t>()] = text;
      v.scores[id.get<size_t>()] = -1000.0;
      v.types[id.get<size_t>()] = static_cast<int64_t>(TokenType::UserDefined);
    }
  }
  if (fs::is_regular_file(dir + "/tokenizer_config.json")) {
    const json cfg = parse_json_file(dir + "/tokenizer_config.json");
    const json decoder =
        cfg.is_object() ? cfg.value("added_tokens_decoder", json::object()) : json();
    if (decoder.is_object())
      for (const auto& [key, data] : decoder.items()) {
        const size_t id = std::stoul(key);
        if (id >= size || !data.is_object() || !data.contains("content")) continue;
        std::string text = data["content"].get<std::string>();
        const bool control = data.value("special", false) || token_looks_special(text);
        if (!control) text = unescape_spaces(text);
        v.types[id] = static_cast<int64_t>(control ? TokenType::Control : TokenType::UserDefined);
        v.scores[id] = -1000.0;
        v.tokens[id] = text;
      }
  }
  return v;
}

// The byte-level BPE vocabulary: model.vocab and the added tokens, ids past them "[PADi]".
Vocab bpe_vocab(const json& tok, int64_t n_vocab, const std::string& path) {
  std::map<int64_t, std::string> by_id;
  const json& vocab = tok["model"]["vocab"];
  for (const auto& [text, id] : vocab.items())
    if (id.is_number_integer()) by_id[id.get<int64_t>()] = text;
  std::map<int64_t, const json*> added;
  static const json kNone = json::array();
  const json& added_tokens = tok.contains("added_tokens") ? tok["added_tokens"] : kNone;
  for (const json& a : added_tokens)
    if (a.is_object() && a.contains("id") && a["id"].is_number_integer()) {
      by_id[a["id"].get<int64_t>()] = a.value("content", "");
      added[a["id"].get<int64_t>()] = &a;
    }
  const int64_t size = n_vocab > 0 ? n_vocab : static_cast<int64_t>(by_id.size());
  if (!by_id.empty() && by_id.rbegin()->first >= size)
    fail(ErrorKind::Model, path + ": token id " + std::to_string(by_id.rbegin()->first) +
                               " is past the model's vocab_size " + std::to_string(size));
  Vocab v;
  for (int64_t i = 0; i < size; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      v.tokens.push_back("[PAD" + std::to_string(i) + "]");
      v.types.push_back(static_cast<int64_t>(TokenType::Unused));
      continue;
    }
    std::string text = it->second;
    TokenType type = TokenType::Normal;
    if (auto a = added.find(i); a != added.end()) {
      type = a->second->value("special", false) || token_looks_special(text)
                 ? TokenType::Control
                 : TokenType::UserDefined;
      if (type == TokenType::UserDefined) text = unescape_spaces(text);
    }
    v.tokens.push_back(std::move(text));
    v.types.push_back(static_cast<int64_t>(type));
  }
  return v;
}

// The texts transformers counts as special tokens (all_special_tokens): tokenizer_config's named
// ones and its extra (additional) special tokens.
std::set<std::string> transformers_specials(const std::string& dir) {
  std::set<std::string> out;
  if (!fs::is_regular_file(dir + "/tokenizer_config.json")) return out;
  const json cfg = parse_json_file(dir + "/tokenizer_config.json");
  if (!cfg.is_object()) return out;
  const auto add = [&](const json& t) {
    if (t.is_string()) out.insert(t.get<std::string>());
    if (t.is_object() && t.contains("content") && t["content"].is_string())
      out.insert(t["content"].get<std::string>());
  };
  for (const char* k :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (cfg.contains(k)) add(cfg[k]);
  for (const char* k : {"extra_special_tokens", "additional_special_tokens"})
    if (cfg.contains(k) && (cfg[k].is_array() || cfg[k].is_object()))
      for (const json& t : cfg[k]) add(t);
  return out;
}

// gguf-py's LlamaHfVocab: model.vocab by id (a <0xXX> byte token is a byte, a special token
// control), then the added tokens past it; every score -1000.
Vocab llama_hf_vocab(const json& tok, const std::string& dir, const VocabRules& rules) {
  const std::string path = dir + "/tokenizer.json";
  const json& model = tok["model"];
  if (!model.value("byte_fallback", false) || !tok.contains("decoder") ||
      !tok["decoder"].is_object() || tok["decoder"].value("type", "") != "Sequence")
    fail(ErrorKind::Unsupported, path + ": not a byte-fallback BPE tokenizer (Llama-style)");
  std::map<int64_t, std::string> base, added;
  for (const auto& [text, id] : model["vocab"].items())
    if (id.is_number_integer()) base[id.get<int64_t>()] = text;
  const auto n_base = static_cast<int64_t>(base.size());
  for (const json& a : tok.value("added_tokens", json::array()))
    if (a.is_object() && a.contains("id") && a["id"].is_number_integer()) {
      const int64_t id = a["id"].get<int64_t>();
      (id < n_base ? base : added)[id] = a.value("content", "");
    }
  if (!base.empty() && base.rbegin()->first != n_base - 1)
    fail(ErrorKind::Model, path + ": model.vocab's ids are not 0.." + std::to_string(n_base - 1));
  const std::set<std::string> specials = transformers_specials(dir);
  const std::set<std::string> shown(rules.user_defined.begin(), rules.user_defined.end());
  Vocab v;
  const auto push = [&](const std::string& text, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(-1000.0);
    v.types.push_back(static_cast<int64_t>(shown.count(text) ? TokenType::UserDefined : type));
  };
  const auto is_byte = [](const std::string& t) {
    return t.size() == 6 && t.starts_with("<0x") && t[5] == '>' &&
           std::isxdigit(static_cast<unsigned char>(t[3])) &&
           std::isxdigit(static_cast<unsigned char>(t[4]));
  };
  for (const auto& [id, text] : base)
    push(text, is_byte(text)          ? TokenType::Byte
               : specials.count(text) ? TokenType::Control
                                      : TokenType::Normal);
  for (const auto& [id, text] : added)
    push(text, specials.count(text) ? TokenType::Control : TokenType::UserDefined);
  return v;
}

// The converter names a pre-tokenizer by hashing how a test text tokenizes; convert writes the
// name the class's models use, and says so when tokenizer.json's splits a test text otherwise.
std::string check_pre_tokenizer(const json& tok, const std::string& pre, const std::string& path) {
  if (pre.empty())
    fail(ErrorKind::Unsupported, path +
                                     ": a byte-level BPE tokenizer for a model class whose "
                                     "converter reads only tokenizer.model");
  static const char* const kText =
      "\n \n\n \t\t x  y   z\r\n I'm sure they'LL say 'Hello' -- we've 3 33 333 3333 1.5e-3 "
      "(a)[b]{c} ...!!?? \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96"
      "\xE7\x95\x8C\xEF\xBC\x8C\xE6\x88\x91 \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 "
      "caf\xC3\xA9 ____==== \t\n";
  const PreTokenizer file(hf_pretokenizer_patterns(tok.value("pre_tokenizer", json()), path), path);
  std::vector<std::string> patterns;
  try {
    patterns = pre_tokenizer_patterns(pre, path);
  } catch (const Error&) {
    return "";  // a name whose splits this project does not know (yet): nothing to check against
  }
  const PreTokenizer named(patterns, path);
  if (file.split(kText) == named.split(kText)) return "";
  return path + ": its pre-tokenizer splits text unlike '" + pre +
         "', which is written as tokenizer.ggml.pre since this model class's models use it";
}

}  // namespace

bool token_looks_special(const std::string& t) {
  const auto wrapped = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

GgufKeyValues convert_vocab(const std::string& dir, const VocabRules& rules, std::string* warning) {
  GgufKeyValues out;
  const std::string cfg_path = dir + "/tokenizer_config.json";
  if (rules.add_prefix_space_key && fs::is_regular_file(cfg_path)) {
    const json cfg = parse_json_file(cfg_path);
    if (cfg.is_object() && cfg.contains("add_prefix_space") && cfg["add_prefix_space"].is_boolean())
      out.emplace_back("tokenizer.ggml.add_space_prefix",
                       gguf_int(GgufType::Bool, cfg["add_prefix_space"].get<bool>() ? 1 : 0));
  }
  GgufKeyValues special;
  if (rules.xlm_roberta) {
    special = xlm_roberta_vocab(dir, rules, out);
  } else if (!rules.llama_hf_model.empty()) {
    Vocab v = llama_hf_vocab(tokenizer_json(dir, "BPE"), dir, rules);
    out.emplace_back("tokenizer.ggml.model", gguf_string(rules.llama_hf_model));
    out.emplace_back("tokenizer.ggml.tokens", strings(std::move(v.tokens)));
    out.emplace_back("tokenizer.ggml.scores", floats(std::move(v.scores)));
    out.emplace_back("tokenizer.ggml.token_type", ints(GgufType::I32, std::move(v.types)));
    special = special_vocab_keys(dir, true, 0, rules.special);
  } else if (rules.wordpiece) {
    Vocab v = bpe_vocab(tokenizer_json(dir, "WordPiece"), rules.n_vocab, dir + "/tokenizer.json");
    // Phantom space: a word's first piece marked with U+2581, a "##" continuation bare.
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.types[i] == static_cast<int64_t>(TokenType::Control)) continue;
      std::string& t = v.tokens[i];
      t = t.starts_with("##") ? t.substr(2) : "\xE2\x96\x81" + t;
    }
    const auto n = static_cast<int64_t>(v.tokens.size());
    out.emplace_back("tokenizer.ggml.token_type_count",
                     gguf_int(GgufType::U32, rules.token_type_count));
    out.emplace_back("tokenizer.ggml.model", gguf_string("bert"));
    out.emplace_back("tokenizer.ggml.pre", gguf_string(rules.bpe_pre));
    out.emplace_back("tokenizer.ggml.tokens", strings(std::move(v.tokens)));
    out.emplace_back("tokenizer.ggml.token_type", ints(GgufType::I32, std::move(v.types)));
    special = special_vocab_keys(dir, false, n, rules.special);
  } else if (fs::is_regular_file(dir + "/tokenizer.model")) {
    const int64_t n = add_scored_vocab("llama", sentencepiece_vocab(dir, rules.n_vocab), out);
    special = special_vocab_keys(dir, false, n, rules.special);
  } else if (fs::is_regular_file(dir + "/tokenizer.json")) {
    const std::string path = dir + "/tokenizer.json";
    const json tok = tokenizer_json(dir, "BPE");
    const std::string mismatch = check_pre_tokenizer(tok, rules.bpe_pre, path);
    if (!mismatch.empty() && warning != nullptr) *warning = mismatch;
    Vocab v = bpe_vocab(tok, rules.n_vocab, path);
    out.emplace_back("tokenizer.ggml.model", gguf_string("gpt2"));
    out.emplace_back("tokenizer.ggml.pre", gguf_string(rules.bpe_pre));
    out.emplace_back("tokenizer.ggml.tokens", strings(std::move(v.tokens)));
    out.emplace_back("tokenizer.ggml.token_type", ints(GgufType::I32, std::move(v.types)));
    special = special_vocab_keys(dir, true, 0, rules.special);
  } else {
    fail(ErrorKind::Model, dir + ": no tokenizer (tokenizer.model or tokenizer.json)");
  }
  for (auto& kv : special) out.push_back(std::move(kv));
  if (rules.no_space_prefix)
    out.emplace_back("tokenizer.ggml.add_space_prefix", gguf_int(GgufType::Bool, 0));
  if (rules.add_bos) {
    // Set again where SpecialVocab set it, as the converter's writer does.
    const auto bos = std::find_if(out.begin(), out.end(), [](const auto& kv) {
      return kv.first == "tokenizer.ggml.add_bos_token";
    });
    if (bos != out.end())
      bos->second = gguf_int(GgufType::Bool, 1);
    else
      out.emplace_back("tokenizer.ggml.add_bos_token", gguf_int(GgufType::Bool, 1));
  }
  return out;
}

}  // namespace ts

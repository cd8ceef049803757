// Tokenizer::from_hf_dir: a Hugging Face model directory. Byte-level BPE, WordPiece and Unigram
// come from tokenizer.json; SentencePiece BPE comes from tokenizer.model (its scores drive the
// merges, which tokenizer.json's merge list alone cannot reproduce), with tokenizer.json's added
// tokens on top; WordPiece without tokenizer.json from vocab.txt (BertTokenizer).
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_nesting.h"
#include "core/mapped_file.h"
#include "text/hf_pretokenizer.h"
#include "text/hf_unigram.h"
#include "text/sentencepiece_model.h"
#include "text/special_tokens.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using json = nlohmann::json;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<json> read_json(const std::string& path) {
  if (!exists(path)) return std::nullopt;
  const MappedFile file(path);
  const auto* p = reinterpret_cast<const char*>(file.data());
  require_json_nesting({p, file.size()}, path, ErrorKind::Model);
  try {
    return json::parse(p, p + file.size());
  } catch (const json::exception& e) {
    fail(ErrorKind::Model, path + ": invalid JSON: " + e.what());
  }
}

// A token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}; "" when absent.
std::string token_content(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

int32_t id_of(const TokenizerSpec& s, const std::string& text, const std::string& what) {
  for (size_t i = 0; i < s.tokens.size(); ++i)
    if (s.tokens[i] == text) return static_cast<int32_t>(i);
  fail(ErrorKind::Model, what + " names token '" + text + "', which is not in the vocabulary");
}

TokenizerSpec spm_spec(const std::string& path) {
  const SentencePieceModel m = read_sentencepiece_model(path);
  if (m.model_type != 2) {
    fail(ErrorKind::Unsupported,
         path + ": SentencePiece model_type " + std::to_string(m.model_type) +
             " is not supported (only BPE, type 2; a Unigram model is read from its "
             "tokenizer.json)");
  }
  if (!m.precompiled_charsmap.empty() && m.normalizer_name != "identity") {
    fail(ErrorKind::Unsupported,
         path + ": normalizer '" + m.normalizer_name + "' is not supported (only identity)");
  }
  if (m.treat_whitespace_as_suffix || !m.escape_whitespaces) {
    fail(ErrorKind::Unsupported,
         path + ": treat_whitespace_as_suffix / escape_whitespaces=false are not supported");
  }
  TokenizerSpec s;
  s.kind = TokenizerKind::SentencePiece;
  s.source = path;
  for (const auto& p : m.pieces) {
    s.tokens.push_back(p.text);
    s.scores.push_back(p.score);
    s.types.push_back(static_cast<TokenType>(p.type));
  }
  const auto n = static_cast<int>(s.tokens.size());
  const auto opt_id = [&](int id, const char* name) {
    if (id >= n)
      fail(ErrorKind::Model, path + ": trainer_spec." + name + " = " + std::to_string(id) +
                                 " is outside the vocabulary");
    return id < 0 ? -1 : id;
  };
  s.unk = opt_id(m.unk_id, "unk_id");
  s.bos = opt_id(m.bos_id, "bos_id");
  s.eos = opt_id(m.eos_id, "eos_id");
  s.add_space_prefix = m.add_dummy_prefix;
  s.remove_extra_whitespaces = m.remove_extra_whitespaces;
  s.add_bos = s.bos >= 0;  // LlamaTokenizer / GemmaTokenizer add BOS unless configured otherwise
  return s;
}

// tokenizer.json's model.vocab ({"text": id, ...}) into s.tokens.
void read_vocab(const json& model, const std::string& path, TokenizerSpec& s) {
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail(ErrorKind::Model, path + ": model.vocab is missing");
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      fail(ErrorKind::Model, path + ": model.vocab['" + text + "'] is not a token id");
    const auto i = static_cast<size_t>(id.get<int64_t>());
    if (i >= s.tokens.size()) s.tokens.resize(i + 1);
    s.tokens[i] = text;
  }
}

TokenizerSpec byte_level_spec(const json& j, const std::string& path) {
  const json& model = j["model"];
  TokenizerSpec s;
  s.kind = TokenizerKind::ByteLevelBpe;
  s.source = path;
  read_vocab(model, path, s);
  if (!model.contains("merges") || !model["merges"].is_array())
    fail(ErrorKind::Model, path + ": model.merges is missing");
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      const std::string t = m.get<std::string>();
      const size_t sp = t.find(' ', 1);
      if (sp == std::string::npos)
        fail(ErrorKind::Model, path + ": merge '" + t + "' has no space");
      s.merges.emplace_back(t.substr(0, sp), t.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      s.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(ErrorKind::Model,
           path + ": model.merges holds an entry that is neither \"a b\" nor [a, b]");
    }
  }
  s.ignore_merges = model.value("ignore_merges", false);
  const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
  // NFC is accepted without being applied, as llama.cpp does: it changes only text that is not
  // already NFC, which is rare in prompts.
  if (!norm.is_null() && norm.value("type", "") != "NFC") {
    fail(ErrorKind::Unsupported, path + ": normalizer '" + norm.value("type", "?") +
                                     "' is not supported for byte-level BPE");
  }
  s.pre_name = "tokenizer.json";
  s.pre_patterns =
      hf_pretokenizer_patterns(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), path);
  return s;
}

// A WordPiece tokenizer.json: its vocabulary, [UNK], the continuation prefix and the longest
// word, and BERT's normaliser and pre-tokenizer, the only ones read with it.
TokenizerSpec wordpiece_spec(const json& j, const std::string& path) {
  const json& model = j["model"];
  TokenizerSpec s;
  s.kind = TokenizerKind::WordPiece;
  s.source = path;
  read_vocab(model, path, s);
  s.continuing_prefix = model.value("continuing_subword_prefix", std::string("##"));
  s.max_word_chars = model.value("max_input_chars_per_word", int64_t{100});
  s.unk = id_of(s, model.value("unk_token", std::string("[UNK]")), path + ": model.unk_token");
  const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
  if (norm.is_null() || norm.value("type", "") != "BertNormalizer")
    fail(ErrorKind::Unsupported, path + ": normalizer '" +
                                     (norm.is_object() ? norm.value("type", "?") : "none") +
                                     "' is not supported with WordPiece (BertNormalizer)");
  const auto flag = [&](const char* key, bool fallback) {
    return norm.contains(key) && norm[key].is_boolean() ? norm[key].get<bool>() : fallback;
  };
  s.bert.clean_text = flag("clean_text", true);
  s.bert.chinese_chars = flag("handle_chinese_chars", true);
  s.bert.lowercase = flag("lowercase", true);
  s.bert.strip_accents = flag("strip_accents", s.bert.lowercase);  // null: as lowercase
  const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  if (pre.is_null() || pre.value("type", "") != "BertPreTokenizer")
    fail(ErrorKind::Unsupported, path + ": pre_tokenizer '" +
                                     (pre.is_object() ? pre.value("type", "?") : "none") +
                                     "' is not supported with WordPiece (BertPreTokenizer)");
  return s;
}

// A BERT checkpoint without tokenizer.json (transformers' slow BertTokenizer): vocab.txt, one
// token a line, and tokenizer_config.json's do_lower_case / strip_accents /
// tokenize_chinese_chars and special tokens ([CLS] text [SEP]).
TokenizerSpec vocab_txt_spec(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  TokenizerSpec s;
  s.kind = TokenizerKind::WordPiece;
  s.source = path;
  const MappedFile file(path);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    s.tokens.emplace_back(line);
    pos = end + 1;
  }
  const std::string config_path = dir + "/tokenizer_config.json";
  const json config = read_json(config_path).value_or(json::object());
  const auto flag = [&](const char* key, bool fallback) {
    return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
  };
  s.bert.lowercase = flag("do_lower_case", true);
  s.bert.strip_accents = flag("strip_accents", s.bert.lowercase);  // null: as lowercase
  s.bert.chinese_chars = flag("tokenize_chinese_chars", true);
  s.types.assign(s.tokens.size(), TokenType::Normal);
  const auto special = [&](const char* key, const char* fallback) {
    std::string name = token_content(config, key);
    const int32_t id = id_of(s, name.empty() ? fallback : name, config_path + ": " + key);
    s.types[static_cast<size_t>(id)] = TokenType::Control;
    return id;
  };
  s.unk = special("unk_token", "[UNK]");
  s.bos = special("cls_token", "[CLS]");
  s.eos = special("sep_token", "[SEP]");
  special("pad_token", "[PAD]");
  special("mask_token", "[MASK]");
  s.add_bos = s.add_eos = true;
  return s;
}

bool is_byte_level(const json& j) {
  const auto has_byte_level = [](const json& node, auto&& self) -> bool {
    if (!node.is_object()) return false;
    if (node.value("type", "") == "ByteLevel") return true;
    for (const char* list : {"pretokenizers", "decoders"})
      if (node.contains(list) && node[list].is_array())
        for (const json& c : node[list])
          if (self(c, self)) return true;
    return false;
  };
  return (j.contains("pre_tokenizer") && has_byte_level(j["pre_tokenizer"], has_byte_level)) ||
         (j.contains("decoder") && has_byte_level(j["decoder"], has_byte_level));
}

void apply_added_tokens(const json& j, TokenizerSpec& s, const std::string& path) {
  if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) return;
  for (const json& t : j["added_tokens"]) {
    if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string())
      fail(ErrorKind::Model, path + ": added_tokens holds an entry without id/content");
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      fail(ErrorKind::Model, path + ": added token id " + std::to_string(id));
    const auto i = static_cast<size_t>(id);
    if (i >= s.tokens.size()) {
      s.tokens.resize(i + 1);
      s.types.resize(i + 1, TokenType::Undefined);
      if (!s.scores.empty()) s.scores.resize(i + 1, 0.0f);
    }
    s.tokens[i] = t["content"].get<std::string>();
    // A SentencePiece model already types its own pieces (<unk> stays Unknown, bytes stay Byte),
    // as a Unigram tokenizer.json types its unk_id.
    const bool own_piece =
        (s.kind == TokenizerKind::SentencePiece || s.kind == TokenizerKind::Unigram) &&
        s.types[i] != TokenType::Undefined && s.types[i] != TokenType::Normal;
    const auto flag = [&](const char* key) {
      if (!t.contains(key)) return false;
      if (!t[key].is_boolean())
        fail(ErrorKind::Model,
             path + ": added token " + std::to_string(id) + "'s " + key + " is not true or false");
      return t[key].get<bool>();
    };
    if (!own_piece) s.types[i] = flag("special") ? TokenType::Control : TokenType::UserDefined;
    if (flag("lstrip")) s.lstrip.push_back(static_cast<int32_t>(i));
    if (flag("rstrip")) s.rstrip.push_back(static_cast<int32_t>(i));
  }
}

// BOS / EOS added by the post-processor template, e.g. "<s> $A"; BERT's [CLS] $A [SEP].
void apply_post_processor(const json& j, TokenizerSpec& s, const std::string& path) {
  if (!j.contains("post_processor") || !j["post_processor"].is_object()) return;
  const json* tp = &j["post_processor"];
  if (tp->value("type", "") == "BertProcessing") {
    const auto named = [&](const char* key) {
      const json v = tp->value(key, json());
      if (!v.is_array() || v.empty() || !v[0].is_string())
        fail(ErrorKind::Model, path + ": post_processor." + key + " is not [token, id]");
      return id_of(s, v[0].get<std::string>(), path + ": post_processor." + key);
    };
    s.bos = named("cls");
    s.eos = named("sep");
    s.add_bos = s.add_eos = true;
    return;
  }
  if (tp->value("type", "") == "Sequence" && tp->contains("processors")) {
    const json* found = nullptr;
    for (const json& p : (*tp)["processors"])
      if (p.value("type", "") == "TemplateProcessing") found = &p;
    if (found == nullptr) return;
    tp = found;
  }
  if (tp->value("type", "") != "TemplateProcessing" || !tp->contains("single")) return;
  const json& single = (*tp)["single"];
  if (!single.is_array() || single.empty()) return;
  const auto special = [&](const json& item) -> std::string {
    if (!item.contains("SpecialToken")) return "";
    return item["SpecialToken"].value("id", "");
  };
  const std::string first = special(single.front());
  const std::string last = special(single.back());
  s.add_bos = !first.empty();
  s.add_eos = single.size() > 1 && !last.empty();
  if (s.add_bos) s.bos = id_of(s, first, path + ": post_processor");
  if (s.add_eos) s.eos = id_of(s, last, path + ": post_processor");
}

void add_eog_ids(const std::string& path, TokenizerSpec& s) {
  const std::optional<json> j = read_json(path);
  if (!j || !j->contains("eos_token_id")) return;
  const json& v = (*j)["eos_token_id"];
  std::vector<int64_t> ids;
  if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
  if (v.is_array())
    for (const json& e : v)
      if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
  for (int64_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(s.tokens.size()))
      fail(ErrorKind::Model,
           path + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary");
    s.extra_eog.push_back(static_cast<int32_t>(id));
  }
}

TokenizerSpec hf_dir_spec(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string model_path = dir + "/tokenizer.model";
  const std::optional<json> tj = read_json(json_path);
  TokenizerSpec s;
  if (tj && tj->contains("model") && (*tj)["model"].value("type", "") == "BPE" &&
      is_byte_level(*tj)) {
    s = byte_level_spec(*tj, json_path);
  } else if (tj && tj->contains("model") && (*tj)["model"].value("type", "") == "WordPiece") {
    s = wordpiece_spec(*tj, json_path);
  } else if (tj && tj->contains("model") && (*tj)["model"].value("type", "") == "Unigram") {
    s = hf_unigram_spec(*tj, json_path);
  } else if (exists(model_path)) {
    s = spm_spec(model_path);
  } else if (!tj && exists(dir + "/vocab.txt")) {
    s = vocab_txt_spec(dir);
  } else if (tj) {
    const std::string type = tj->contains("model") ? (*tj)["model"].value("type", "?") : "?";
    fail(ErrorKind::Unsupported,
         json_path + ": model type '" + type +
             "' without byte-level pre-tokenizer is not supported; a SentencePiece model "
             "needs its tokenizer.model beside it");
  } else {
    fail(ErrorKind::Model,
         dir + ": neither tokenizer.json, tokenizer.model nor (WordPiece) vocab.txt found");
  }
  s.types.resize(s.tokens.size(), TokenType::Normal);
  if (tj) {
    apply_added_tokens(*tj, s, json_path);
    apply_post_processor(*tj, s, json_path);
  }
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (s.tokens[i].empty()) {
      fail(ErrorKind::Model,
           s.source + ": token id " + std::to_string(i) + " has no text (a gap in the vocabulary)");
    }
  }

  const std::string config_path = dir + "/tokenizer_config.json";
  const json config = read_json(config_path).value_or(json::object());
  if (const std::string bos = token_content(config, "bos_token"); !bos.empty())
    s.bos = id_of(s, bos, config_path + ": bos_token");
  // The token the post-processor appends stays the one add_eos appends (a Qwen3-Embedding
  // model's <|endoftext|>, whose state it pools); a different eos_token ends generation as the
  // end-of-turn, as gguf-py converts it.
  const int32_t appended = s.add_eos ? s.eos : -1;
  if (const std::string eos = token_content(config, "eos_token"); !eos.empty())
    s.eos = id_of(s, eos, config_path + ": eos_token");
  if (appended >= 0 && s.eos != appended) {
    if (s.eot < 0) s.eot = s.eos;
    s.eos = appended;
  }
  if (const std::string unk = token_content(config, "unk_token"); !unk.empty())
    s.unk = id_of(s, unk, config_path + ": unk_token");
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
    s.add_bos = config["add_bos_token"].get<bool>();
  if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean())
    s.add_eos = config["add_eos_token"].get<bool>();
  add_eog_ids(dir + "/generation_config.json", s);
  add_eog_ids(dir + "/config.json", s);
  detect_end_of_generation(s);
  return s;
}

}  // namespace

Tokenizer Tokenizer::from_hf_dir(const std::string& dir) {
  // A field holding another JSON type than its own (a string where a flag goes) is nlohmann's
  // type error wherever it is read without a check: a one-line refusal like every other.
  try {
    return Tokenizer(hf_dir_spec(dir));
  } catch (const json::exception& e) {
    fail(ErrorKind::Model,
         dir + ": a tokenizer file holds a value of the wrong type (" + e.what() + ")");
  }
}

}  // namespace ts

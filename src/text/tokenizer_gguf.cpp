// Tokenizer::from_gguf: the `tokenizer.ggml.*` keys llama.cpp's converter writes.
#include <algorithm>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/pretokenizer.h"
#include "text/special_tokens.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

std::string where(const GgufFile& f, const char* key) {
  return f.path() + ": " + key;
}

// An optional token-id key; absent keeps `fallback`. An id outside the vocabulary is an error.
int32_t id_key(const GgufFile& f, const char* key, int32_t fallback, size_t n_tokens) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) return fallback;
  if (*v < 0 || *v >= static_cast<int64_t>(n_tokens)) {
    fail(ErrorKind::Model, where(f, key) + " = " + std::to_string(*v) +
                               " is outside the vocabulary of " + std::to_string(n_tokens));
  }
  return static_cast<int32_t>(*v);
}

const GgufArray& array_key(const GgufFile& f, const char* key, GgufType elem, size_t n_tokens) {
  const GgufArray* a = f.get_array(key);
  if (a == nullptr) fail(ErrorKind::Model, where(f, key) + " is missing");
  const bool ok = elem == GgufType::F32      ? a->size() == a->floats.size()
                  : elem == GgufType::String ? a->size() == a->strings.size()
                                             : a->size() == a->ints.size();
  if (!ok)
    fail(ErrorKind::Model, where(f, key) + " has elements of type " + gguf_type_name(a->elem));
  if (n_tokens != 0 && a->size() != n_tokens) {
    fail(ErrorKind::Model, where(f, key) + " has " + std::to_string(a->size()) + " entries for " +
                               std::to_string(n_tokens) + " tokens");
  }
  return *a;
}

std::vector<std::pair<std::string, std::string>> read_merges(const GgufFile& f) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const std::string& m : array_key(f, "tokenizer.ggml.merges", GgufType::String, 0).strings) {
    // Tokens never contain a space (byte-level BPE spells it, SentencePiece writes U+2581), so
    // the first space after the first character separates the two halves.
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      fail(ErrorKind::Model,
           where(f, "tokenizer.ggml.merges") + " has entry '" + m + "' without a space");
    merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return merges;
}

// llama.cpp's converter spells a word's first piece "\u2581piece" and a continuation "piece"
// (control tokens as they are): back to WordPiece's "piece" and "##piece". Its normaliser keys
// default as llama.cpp reads them (lowercase, and strip accents where it lowercases).
void read_wordpiece(const GgufFile& f, TokenizerSpec& s) {
  constexpr std::string_view kPhantom = "\xE2\x96\x81";
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const TokenType t = s.types.empty() ? TokenType::Normal : s.types[i];
    if (t == TokenType::Control || t == TokenType::Unknown) continue;
    std::string& tok = s.tokens[i];
    tok = tok.starts_with(kPhantom) ? tok.substr(kPhantom.size()) : s.continuing_prefix + tok;
  }
  s.bert.lowercase = f.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
  s.bert.strip_accents =
      f.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(s.bert.lowercase);
  // [CLS] text [SEP], by the BERT keys or the tokens' names where the BOS / EOS keys are absent.
  const auto named = [&](const char* text) {
    const auto it = std::find(s.tokens.begin(), s.tokens.end(), text);
    return it == s.tokens.end() ? -1 : static_cast<int32_t>(it - s.tokens.begin());
  };
  s.bos = id_key(f, "tokenizer.ggml.cls_token_id", named("[CLS]"), s.tokens.size());
  s.eos = id_key(f, "tokenizer.ggml.seperator_token_id", named("[SEP]"), s.tokens.size());
  s.unk = named("[UNK]");
  s.add_bos = s.bos >= 0;
  s.add_eos = s.eos >= 0;
}

// A "t5" vocabulary as llama.cpp's UGM tokenizer reads it: scores, sentencepiece's
// normalisation rules and whitespace options (both off unless the file says so), and T5's
// special tokens where the keys are absent (EOS 1, unknown 2, EOS added, no BOS).
void read_unigram(const GgufFile& f, TokenizerSpec& s) {
  const size_t n = s.tokens.size();
  for (double v : array_key(f, "tokenizer.ggml.scores", GgufType::F32, n).floats)
    s.scores.push_back(static_cast<float>(v));
  if (f.get_array("tokenizer.ggml.precompiled_charsmap") != nullptr) {
    const GgufArray& a = array_key(f, "tokenizer.ggml.precompiled_charsmap", GgufType::U8, 0);
    if (a.elem != GgufType::U8 && a.elem != GgufType::I8)
      fail(ErrorKind::Model, where(f, "tokenizer.ggml.precompiled_charsmap") +
                                 " has elements of type " + gguf_type_name(a.elem));
    s.charsmap.reserve(a.ints.size());
    for (int64_t b : a.ints) s.charsmap.push_back(static_cast<char>(b));
  }
  s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(false);
  s.remove_extra_whitespaces =
      f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
  s.eos = n > 1 ? 1 : -1;
  s.unk = n > 2 ? 2 : -1;
  s.add_eos = s.eos >= 0;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  TokenizerSpec s;
  s.source = f.path();
  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) fail(ErrorKind::Model, where(f, "tokenizer.ggml.model") + " is missing");
  if (*model == "llama") {
    s.kind = TokenizerKind::SentencePiece;
  } else if (*model == "gpt2") {
    s.kind = TokenizerKind::ByteLevelBpe;
  } else if (*model == "gemma4") {
    // SentencePiece-style (spaces as U+2581, <0xNN> byte fallback) merged by the listed merges'
    // rank, as llama.cpp reads it; the file's scores are placeholders.
    s.kind = TokenizerKind::SentencePiece;
  } else if (*model == "bert") {
    s.kind = TokenizerKind::WordPiece;
  } else if (*model == "t5") {
    s.kind = TokenizerKind::Unigram;
  } else {
    fail(ErrorKind::Unsupported,
         where(f, "tokenizer.ggml.model") + " = '" + *model +
             "' is not supported (only 'llama' SentencePiece, 'gemma4', 'gpt2' byte-level "
             "BPE, 'bert' WordPiece and 't5' Unigram)");
  }

  s.tokens = array_key(f, "tokenizer.ggml.tokens", GgufType::String, 0).strings;
  const size_t n = s.tokens.size();
  if (f.get_array("tokenizer.ggml.token_type") != nullptr) {
    for (int64_t t : array_key(f, "tokenizer.ggml.token_type", GgufType::I32, n).ints) {
      if (t < 0 || t > static_cast<int64_t>(TokenType::Byte)) {
        fail(ErrorKind::Model,
             where(f, "tokenizer.ggml.token_type") + " holds unknown type " + std::to_string(t));
      }
      s.types.push_back(static_cast<TokenType>(t));
    }
  }

  const bool by_merges = *model == "gemma4";
  if (by_merges) s.merges = read_merges(f);
  if (s.kind == TokenizerKind::WordPiece) {
    read_wordpiece(f, s);
  } else if (s.kind == TokenizerKind::Unigram) {
    read_unigram(f, s);
  } else if (s.kind == TokenizerKind::SentencePiece && !by_merges) {
    if (f.get_array("tokenizer.ggml.scores") == nullptr) {
      fail(ErrorKind::Model, where(f, "tokenizer.ggml.scores") +
                                 " is missing (a SentencePiece vocabulary merges by score)");
    }
    for (double v : array_key(f, "tokenizer.ggml.scores", GgufType::F32, n).floats)
      s.scores.push_back(static_cast<float>(v));
    // llama.cpp's defaults for a SentencePiece vocabulary whose file does not say otherwise.
    // The space-prefix keys only exist for SentencePiece: byte-level BPE never adds a prefix
    // space (llama.cpp ignores the key there too).
    s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    s.remove_extra_whitespaces =
        f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    s.add_bos = true;
    s.bos = n > 1 ? 1 : -1;
    s.eos = n > 2 ? 2 : -1;
    s.unk = 0;
  } else if (by_merges) {
    s.scores.assign(n, 0.0f);
    // llama.cpp's gemma4 vocabulary: no dummy prefix unless the file says so, BOS added.
    s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(false);
    s.add_bos = true;
  } else {
    s.merges = read_merges(f);
    s.pre_name = f.get_string("tokenizer.ggml.pre").value_or("");
    s.pre_patterns = pre_tokenizer_patterns(s.pre_name, f.path());
    s.ignore_merges = pre_tokenizer_ignores_merges(s.pre_name);
    s.add_bos = s.ignore_merges || s.pre_name == "chameleon";
  }

  s.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(s.add_bos);
  s.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(s.add_eos);
  s.bos = id_key(f, "tokenizer.ggml.bos_token_id", s.bos, n);
  s.eos = id_key(f, "tokenizer.ggml.eos_token_id", s.eos, n);
  s.unk = id_key(f, "tokenizer.ggml.unknown_token_id", s.unk, n);
  s.eot = id_key(f, "tokenizer.ggml.eot_token_id", -1, n);
  s.eom = id_key(f, "tokenizer.ggml.eom_token_id", -1, n);
  s.fim_pad = id_key(f, "tokenizer.ggml.fim_pad_token_id", -1, n);
  s.fim_repo = id_key(f, "tokenizer.ggml.fim_rep_token_id", -1, n);
  s.fim_file_sep = id_key(f, "tokenizer.ggml.fim_sep_token_id", -1, n);
  if (s.types.empty()) s.types.assign(n, TokenType::Normal);
  detect_end_of_generation(s);
  return Tokenizer(std::move(s));
}

}  // namespace ts

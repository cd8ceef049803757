#include "text/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "core/utf8.h"
#include "text/byte_unicode.h"
#include "text/pretokenizer.h"

namespace ts {
namespace {

constexpr uint8_t kLstrip = 1;
constexpr uint8_t kRstrip = 2;

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> NN, or -1.
int byte_piece_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]);
  const int lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// A SentencePiece piece's text: U+2581 stands for a space.
std::string spm_piece_text(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(t[i]);
    }
  }
  return out;
}

}  // namespace

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer::Tokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {
  check_spec();
  index_tokens();
  index_specials();
}

void Tokenizer::check_spec() {
  const std::string& src = spec_.source;
  const size_t n = spec_.tokens.size();
  if (n == 0) fail(ErrorKind::Model, src + ": the vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) fail(ErrorKind::Model, src + ": vocabulary too large");
  if (spec_.types.empty()) spec_.types.assign(n, TokenType::Normal);
  if (spec_.types.size() != n) {
    fail(ErrorKind::Model, src + ": " + std::to_string(spec_.types.size()) + " token types for " +
                               std::to_string(n) + " tokens");
  }
  if (spec_.kind == TokenizerKind::SentencePiece || spec_.kind == TokenizerKind::Unigram) {
    if (spec_.scores.empty()) spec_.scores.assign(n, 0.0f);
    if (spec_.scores.size() != n) {
      fail(ErrorKind::Model, src + ": " + std::to_string(spec_.scores.size()) + " scores for " +
                                 std::to_string(n) + " tokens");
    }
    if (spec_.kind == TokenizerKind::Unigram && spec_.unk < 0)
      fail(ErrorKind::Model, src + ": Unigram vocabulary without an unknown token");
  } else if (spec_.kind == TokenizerKind::WordPiece) {
    if (spec_.unk < 0) fail(ErrorKind::Model, src + ": WordPiece vocabulary without [UNK]");
  } else if (spec_.merges.empty()) {
    fail(ErrorKind::Model, src + ": byte-level BPE vocabulary without merges");
  }
  const auto check = [&](int32_t id, bool optional, const char* what) {
    if (id < (optional ? -1 : 0) || id >= static_cast<int32_t>(n)) {
      fail(ErrorKind::Model, src + ": " + what + " token id " + std::to_string(id) +
                                 " is outside the vocabulary of " + std::to_string(n));
    }
  };
  check(spec_.bos, true, "BOS");
  check(spec_.eos, true, "EOS");
  check(spec_.eot, true, "EOT");
  check(spec_.eom, true, "EOM");
  check(spec_.unk, true, "UNK");
  for (int32_t id : spec_.extra_eog) check(id, false, "end-of-generation");
  for (int32_t id : spec_.lstrip) check(id, false, "lstrip");
  for (int32_t id : spec_.rstrip) check(id, false, "rstrip");
  if (spec_.add_bos && spec_.bos < 0)
    fail(ErrorKind::Model, src + ": adds BOS but has no BOS token");
  if (spec_.add_eos && spec_.eos < 0)
    fail(ErrorKind::Model, src + ": adds EOS but has no EOS token");
}

void Tokenizer::index_tokens() {
  const size_t n = spec_.tokens.size();
  by_text_.reserve(n);
  byte_token_.fill(-1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = spec_.tokens[i];
    // Duplicate spellings exist in real vocabularies; the first id wins, as in the HF tokenizers.
    by_text_.emplace(t, static_cast<int32_t>(i));
    if (spec_.kind == TokenizerKind::SentencePiece && spec_.types[i] == TokenType::Byte) {
      const int b = byte_piece_value(t);
      if (b < 0) {
        fail(ErrorKind::Model,
             spec_.source + ": byte token " + std::to_string(i) + " is '" + t + "', not <0xNN>");
      }
      if (byte_token_[b] < 0) byte_token_[b] = static_cast<int32_t>(i);
    }
  }
  if (spec_.kind == TokenizerKind::SentencePiece) {
    // Some converters type the byte pieces NORMAL; byte fallback goes by the <0xNN> spelling,
    // as llama.cpp's does.
    for (int b = 0; b < 256; ++b) {
      if (byte_token_[b] >= 0) continue;
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      if (const auto id = find_token(buf)) byte_token_[b] = *id;
    }
    index_merges();
  } else if (spec_.kind == TokenizerKind::ByteLevelBpe) {
    index_merges();
    pre_ = std::make_unique<PreTokenizer>(spec_.pre_patterns, spec_.source);
  } else if (spec_.kind == TokenizerKind::Unigram) {
    index_unigram();
  }
}

void Tokenizer::index_merges() {
  merge_rank_.reserve(spec_.merges.size());
  for (size_t r = 0; r < spec_.merges.size(); ++r) {
    const auto& [a, b] = spec_.merges[r];
    merge_rank_.emplace(a + '\0' + b, static_cast<int32_t>(r));
  }
}

void Tokenizer::index_specials() {
  const size_t n = spec_.tokens.size();
  for (size_t i = 0; i < n; ++i) {
    if (is_special_type(spec_.types[i]) && !spec_.tokens[i].empty()) {
      specials_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    return spec_.tokens[a].size() > spec_.tokens[b].size();
  });
  strip_.assign(n, 0);
  for (int32_t id : spec_.lstrip) strip_[id] |= kLstrip;
  for (int32_t id : spec_.rstrip) strip_[id] |= kRstrip;

  for (int32_t id : {spec_.eos, spec_.eot, spec_.eom}) {
    if (id >= 0) eog_.push_back(id);
  }
  eog_.insert(eog_.end(), spec_.extra_eog.begin(), spec_.extra_eog.end());
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    fail(ErrorKind::Input, spec_.source + ": token id " + std::to_string(id) +
                               " is outside the vocabulary of " + std::to_string(vocab_size()));
  }
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return spec_.tokens[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return spec_.types[id];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const auto it = by_text_.find(text);
  if (it == by_text_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

// Special tokens are cut out longest first: each one claims its non-overlapping occurrences,
// left to right, inside the text no longer-or-equal token has claimed (llama.cpp's order, so a
// long token is never broken by a shorter one inside it). Whitespace a token strips is dropped.
std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  constexpr int32_t kFree = -1;
  constexpr int32_t kDropped = -2;
  std::vector<int32_t> owner;  // per byte: kFree, kDropped, or the token id covering it
  const auto free_space = [&](size_t k) {
    return owner[k] == kFree && std::isspace(static_cast<uint8_t>(text[k]));
  };
  for (int32_t id : specials_) {
    if (!parse_special && spec_.types[id] != TokenType::UserDefined) continue;
    const std::string& t = spec_.tokens[id];
    size_t from = 0;
    while (true) {
      const size_t at = text.find(t, from);
      if (at == std::string_view::npos) break;
      if (owner.empty()) owner.assign(text.size(), kFree);
      const size_t end = at + t.size();
      if (!std::all_of(owner.begin() + at, owner.begin() + end,
                       [](int32_t o) { return o == kFree; })) {
        from = at + 1;
        continue;
      }
      std::fill(owner.begin() + at, owner.begin() + end, id);
      from = end;
      if (strip_[id] & kLstrip) {
        for (size_t k = at; k > 0 && free_space(k - 1); --k) owner[k - 1] = kDropped;
      }
      if (strip_[id] & kRstrip) {
        for (size_t k = end; k < text.size() && free_space(k); ++k) owner[k] = kDropped;
      }
    }
  }
  std::vector<Fragment> out;
  if (owner.empty()) {
    if (!text.empty()) out.push_back({-1, text});
    return out;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    if (owner[pos] == kDropped) {
      ++pos;
    } else if (owner[pos] == kFree) {
      size_t end = pos;
      while (end < text.size() && owner[end] == kFree) ++end;
      out.push_back({-1, text.substr(pos, end - pos)});
      pos = end;
    } else {
      const int32_t id = owner[pos];
      out.push_back({id, text.substr(pos, spec_.tokens[id].size())});
      pos += spec_.tokens[id].size();
    }
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != std::string_view::npos) {
    fail(ErrorKind::Input,
         "text to tokenize is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  std::vector<int32_t> out;
  if (add_bos) {
    if (spec_.bos < 0)
      fail(ErrorKind::Input, spec_.source + ": BOS requested but the vocabulary has none");
    out.push_back(spec_.bos);
  }
  bool after_special = true;  // the start of the text counts as "after a special token"
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (spec_.kind == TokenizerKind::SentencePiece) {
      encode_spm(f.text, after_special, out);
    } else if (spec_.kind == TokenizerKind::WordPiece) {
      encode_wordpiece(f.text, out);
    } else if (spec_.kind == TokenizerKind::Unigram) {
      encode_unigram(f.text, out);
    } else {
      encode_bpe(f.text, out);
    }
    after_special = false;
  }
  return out;
}

void Tokenizer::push_bytes(std::string_view piece, std::vector<int32_t>& out) const {
  const bool all_bytes = std::all_of(piece.begin(), piece.end(), [&](char c) {
    return byte_token_[static_cast<uint8_t>(c)] >= 0;
  });
  if (all_bytes) {
    for (char c : piece) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
  } else if (spec_.unk >= 0) {
    // Without byte fallback an unknown character is one unknown token, as in SentencePiece.
    out.push_back(spec_.unk);
  } else {
    fail(ErrorKind::Input,
         spec_.source + ": '" + std::string(piece) +
             "' has no token, no byte tokens and the vocabulary no unknown token");
  }
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  const std::string& t = spec_.tokens[id];
  switch (spec_.types[id]) {
    case TokenType::Control:
    case TokenType::Unknown:
      return render_special ? t : std::string();
    case TokenType::UserDefined:
      return t;
    case TokenType::Unused:
    case TokenType::Undefined:
      return std::string();
    case TokenType::Byte:
      if (spec_.kind == TokenizerKind::SentencePiece ||
          (spec_.kind == TokenizerKind::Unigram && byte_piece_value(t) >= 0))
        return std::string(1, static_cast<char>(byte_piece_value(t)));
      break;
    case TokenType::Normal:
      break;
  }
  if (spec_.kind == TokenizerKind::WordPiece)
    return t.starts_with(spec_.continuing_prefix) ? t.substr(spec_.continuing_prefix.size())
                                                  : " " + t;
  return spec_.kind == TokenizerKind::ByteLevelBpe ? byte_level_to_bytes(t) : spm_piece_text(t);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  // A WordPiece text's first word has no space before it, as a SentencePiece one with a prefix.
  bool strip_space = spec_.add_space_prefix || spec_.kind == TokenizerKind::WordPiece;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (piece.empty()) continue;
    if (strip_space && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

}  // namespace ts

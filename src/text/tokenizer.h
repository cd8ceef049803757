// Text <-> token ids for the tokenizer families the models ship:
//  * SentencePiece-style BPE (Llama 1/2, Mistral, Gemma): spaces become U+2581, adjacent pieces
//    merge in order of the vocabulary's scores, unknown characters fall back to <0xNN> bytes.
//  * Byte-level BPE (GPT-2 lineage: Llama 3, Qwen, SmolLM, DeepSeek, Falcon, StarCoder...): text
//    is cut into words by the pre-tokenizer regexes, bytes are spelled in GPT-2's alphabet and
//    merged by rank.
//  * WordPiece (BERT encoders): BERT's basic tokenizer cuts the text into words
//    (bert_basic_tokenizer.h), each cut greedily into the longest vocabulary pieces, continuations
//    spelled "##piece"; a word with no such cut is [UNK].
//  * Unigram (SentencePiece's unigram model: XLM-R, T5): the text is normalised by the
//    precompiled charsmap, spaces become U+2581, and the cut whose pieces' scores sum highest
//    wins (Viterbi); a character no piece covers is the unknown token (tokenizer_ugm.cpp).
// Special and user-defined tokens are split out of the text before any algorithm runs, as
// llama.cpp does. RWKV vocabularies are refused.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bert_basic_tokenizer.h"
#include "text/precompiled_charsmap.h"

namespace ts {

class GgufFile;
class PreTokenizer;

// The token types of GGUF `tokenizer.ggml.token_type` and SentencePiece's ModelProto.
enum class TokenType : uint8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

enum class TokenizerKind { SentencePiece, ByteLevelBpe, WordPiece, Unigram };

// The whitespace steps of a tokenizer.json Unigram pipeline after its Precompiled normaliser:
// the Strip / Replace(" {2,}") normalisers and the WhitespaceSplit / Metaspace pre-tokenizers
// transformers writes for SentencePiece models. A GGUF "t5" vocabulary has none: sentencepiece's
// own rules (add_space_prefix, remove_extra_whitespaces) apply, as llama.cpp reads them.
struct UnigramHfSteps {
  bool strip_left = false;
  bool strip_right = false;
  bool collapse_spaces = false;   // Replace(Regex(" {2,}"), " " or U+2581)
  bool whitespace_split = false;  // words at Unicode whitespace, the whitespace dropped
  bool prepend = true;            // Metaspace prepend_scheme "always" (false: "never")
  bool split = true;              // Metaspace split: each U+2581 starts a word of its own
};

// A vocabulary as a file describes it; loaders fill it in and the Tokenizer constructor checks it.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::SentencePiece;
  std::string source;  // the file, for error messages
  std::vector<std::string> tokens;
  std::vector<float> scores;  // SentencePiece merge priority per token (higher merges first)
  std::vector<TokenType> types;
  // Byte-level BPE, rank = index; a SentencePiece-style vocabulary that has them (Gemma 4's GGUF)
  // merges by their rank instead of its scores.
  std::vector<std::pair<std::string, std::string>> merges;
  std::string pre_name;                   // byte-level BPE, for display
  std::vector<std::string> pre_patterns;  // byte-level BPE
  bool ignore_merges = false;     // a word that is itself a token is not merged up from bytes
  bool add_space_prefix = false;  // SentencePiece: a space before the text (dummy prefix)
  bool remove_extra_whitespaces = false;  // SentencePiece normalizer option
  // WordPiece: the basic tokenizer's options, the spelling of a continuation piece's prefix and
  // the longest word (in characters) that is cut rather than read as unknown.
  BertNormalizerOptions bert;
  std::string continuing_prefix = "##";
  int64_t max_word_chars = 100;
  // Unigram: sentencepiece's normalisation rules (empty: none) and, from a tokenizer.json, its
  // whitespace steps.
  std::string charsmap;
  std::optional<UnigramHfSteps> hf_steps;
  bool add_bos = false;
  bool add_eos = false;
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t eot = -1;
  int32_t eom = -1;
  int32_t unk = -1;
  // Fill-in-the-middle padding / repository / file separators: they end generation too.
  int32_t fim_pad = -1;
  int32_t fim_repo = -1;
  int32_t fim_file_sep = -1;
  std::vector<int32_t> extra_eog;  // further end-of-generation ids (e.g. HF eos_token_id lists)
  std::vector<int32_t> lstrip;     // special tokens that swallow whitespace on their left
  std::vector<int32_t> rstrip;     // ... and on their right
};

class Tokenizer {
 public:
  static Tokenizer from_gguf(const GgufFile& file);
  // Reads tokenizer.json (byte-level BPE) or tokenizer.model (SentencePiece), plus
  // tokenizer_config.json / config.json / generation_config.json for the special-token rules.
  static Tokenizer from_hf_dir(const std::string& dir);

  explicit Tokenizer(TokenizerSpec spec);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // `text` must be valid UTF-8 (an Input error names the byte offset otherwise). add_bos
  // prepends bos() (an error when there is none); EOS is never appended here: add_eos() says
  // whether the model wants it. parse_special: control tokens written in the text (e.g.
  // "<|im_start|>") become their ids; user-defined tokens are always split out.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The bytes one token stands for (possibly a partial UTF-8 sequence). Control and unknown
  // tokens give their text when render_special, nothing otherwise.
  std::string token_to_piece(int32_t id, bool render_special = true) const;
  // The text of a sequence: pieces concatenated, minus the one space a SentencePiece vocabulary
  // with add_space_prefix put in front of the first word.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  const std::string& token_text(int32_t id) const;  // the vocabulary's own spelling
  TokenType token_type(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  TokenizerKind kind() const { return spec_.kind; }
  const std::string& source() const { return spec_.source; }
  const std::string& pre_name() const { return spec_.pre_name; }
  int32_t bos() const { return spec_.bos; }
  int32_t eos() const { return spec_.eos; }
  int32_t eot() const { return spec_.eot; }
  int32_t unk() const { return spec_.unk; }
  bool add_bos() const { return spec_.add_bos; }
  bool add_eos() const { return spec_.add_eos; }
  bool add_space_prefix() const { return spec_.add_space_prefix; }
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }

 private:
  struct Fragment {
    int32_t token;  // -1: raw text
    std::string_view text;
  };
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using TextMap = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

  void check_spec();
  void index_tokens();
  void index_specials();
  void check_id(int32_t id) const;
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void encode_spm(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  void index_merges();
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const;
  void encode_wordpiece(std::string_view text, std::vector<int32_t>& out) const;
  void index_unigram();
  void encode_unigram(std::string_view text, std::vector<int32_t>& out) const;
  void unigram_viterbi(std::string_view text, std::vector<int32_t>& out) const;
  void push_bytes(std::string_view piece, std::vector<int32_t>& out) const;

  TokenizerSpec spec_;
  TextMap by_text_;
  TextMap merge_rank_;  // key: left + '\0' + right
  std::array<int32_t, 256> byte_token_{};
  std::vector<int32_t> specials_;  // split out before encoding, longest text first
  std::vector<uint8_t> strip_;     // per token: bit 0 lstrip, bit 1 rstrip
  std::vector<int32_t> eog_;
  std::unique_ptr<PreTokenizer> pre_;
  PrecompiledCharsmap charsmap_;
  double unigram_unk_score_ = 0;  // the lowest piece score less sentencepiece's penalty of 10
  size_t unigram_longest_ = 0;    // bytes of the longest piece
};

}  // namespace ts

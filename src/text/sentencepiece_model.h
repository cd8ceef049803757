// A minimal reader of SentencePiece's `tokenizer.model` (a serialized ModelProto): the pieces
// with their scores and types, and the trainer / normalizer fields a tokenizer needs. Every
// length and tag is checked against the buffer; unknown fields are skipped by their wire type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct SentencePieceModel {
  struct Piece {
    std::string text;
    float score = 0.0f;
    int type = 1;  // ModelProto.SentencePiece.Type; NORMAL by default
  };
  std::vector<Piece> pieces;
  // TrainerSpec (field defaults are those of sentencepiece_model.proto).
  int model_type = 1;  // 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int unk_id = 0;
  int bos_id = 1;
  int eos_id = 2;
  int pad_id = -1;
  // NormalizerSpec.
  std::string normalizer_name;
  std::string precompiled_charsmap;  // the normalisation rules (precompiled_charsmap.h)
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses the bytes of a ModelProto; `what` (the file) prefixes error messages.
SentencePieceModel parse_sentencepiece_model(const uint8_t* data, size_t size,
                                             const std::string& what);
SentencePieceModel read_sentencepiece_model(const std::string& path);

}  // namespace ts

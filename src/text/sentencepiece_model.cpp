#include "text/sentencepiece_model.h"

#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace ts {
namespace {

// Field numbers of sentencepiece_model.proto.
enum : uint32_t {
  kModelPieces = 1,
  kModelTrainerSpec = 2,
  kModelNormalizerSpec = 3,
  kPieceText = 1,
  kPieceScore = 2,
  kPieceType = 3,
  kTrainerModelType = 3,
  kTrainerTreatWhitespaceAsSuffix = 24,
  kTrainerByteFallback = 35,
  kTrainerUnkId = 40,
  kTrainerBosId = 41,
  kTrainerEosId = 42,
  kTrainerPadId = 43,
  kNormName = 1,
  kNormCharsmap = 2,
  kNormAddDummyPrefix = 3,
  kNormRemoveExtraWhitespaces = 4,
  kNormEscapeWhitespaces = 5,
};

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

class ProtoReader {
 public:
  ProtoReader(const uint8_t* p, size_t n, std::string what)
      : p_(p), end_(p + n), what_(std::move(what)) {}

  bool done() const { return p_ == end_; }

  // Reads a field key; returns false at the end of the message.
  bool next(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const uint64_t key = varint();
    field = static_cast<uint32_t>(key >> 3);
    wire = static_cast<uint32_t>(key & 7);
    if (field == 0) error("field number 0");
    return true;
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) error("truncated varint");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    error("varint longer than 10 bytes");
  }

  // int32 fields are sign-extended to 64 bits on the wire.
  int32_t int32() { return static_cast<int32_t>(static_cast<int64_t>(varint())); }

  float fixed32_float() {
    need(4);
    float f;
    std::memcpy(&f, p_, 4);
    p_ += 4;
    return f;
  }

  ProtoReader sub(const std::string& name) {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_))
      error(name + " length " + std::to_string(n) + " runs past the end");
    ProtoReader r(p_, n, what_ + ": " + name);
    p_ += n;
    return r;
  }

  std::string bytes(const std::string& name) {
    ProtoReader r = sub(name);
    return std::string(reinterpret_cast<const char*>(r.p_), r.end_ - r.p_);
  }

  void skip(uint32_t wire) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        need(8);
        p_ += 8;
        return;
      case kBytes:
        sub("unknown field");
        return;
      case kFixed32:
        need(4);
        p_ += 4;
        return;
      default:
        error("unsupported wire type " + std::to_string(wire));
    }
  }

  void expect(uint32_t wire, uint32_t want, const char* field) {
    if (wire != want)
      error(std::string("field ") + field + " has wire type " + std::to_string(wire));
  }

  [[noreturn]] void error(const std::string& msg) const {
    fail(ErrorKind::Model, what_ + ": malformed SentencePiece model: " + msg);
  }

 private:
  void need(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) error("truncated fixed-size field");
  }

  const uint8_t* p_;
  const uint8_t* end_;
  std::string what_;
};

SentencePieceModel::Piece read_piece(ProtoReader r) {
  SentencePieceModel::Piece piece;
  uint32_t field, wire;
  while (r.next(field, wire)) {
    if (field == kPieceText) {
      r.expect(wire, kBytes, "piece");
      piece.text = r.bytes("piece");
    } else if (field == kPieceScore) {
      r.expect(wire, kFixed32, "score");
      piece.score = r.fixed32_float();
    } else if (field == kPieceType) {
      r.expect(wire, kVarint, "type");
      piece.type = r.int32();
      if (piece.type < 1 || piece.type > 6) r.error("piece type " + std::to_string(piece.type));
    } else {
      r.skip(wire);
    }
  }
  return piece;
}

void read_trainer(ProtoReader r, SentencePieceModel& m) {
  uint32_t field, wire;
  while (r.next(field, wire)) {
    const auto int_field = [&](int& dst, const char* name) {
      r.expect(wire, kVarint, name);
      dst = r.int32();
    };
    const auto bool_field = [&](bool& dst, const char* name) {
      r.expect(wire, kVarint, name);
      dst = r.varint() != 0;
    };
    switch (field) {
      case kTrainerModelType:
        int_field(m.model_type, "model_type");
        break;
      case kTrainerTreatWhitespaceAsSuffix:
        bool_field(m.treat_whitespace_as_suffix, "treat_whitespace_as_suffix");
        break;
      case kTrainerByteFallback:
        bool_field(m.byte_fallback, "byte_fallback");
        break;
      case kTrainerUnkId:
        int_field(m.unk_id, "unk_id");
        break;
      case kTrainerBosId:
        int_field(m.bos_id, "bos_id");
        break;
      case kTrainerEosId:
        int_field(m.eos_id, "eos_id");
        break;
      case kTrainerPadId:
        int_field(m.pad_id, "pad_id");
        break;
      default:
        r.skip(wire);
    }
  }
}

void read_normalizer(ProtoReader r, SentencePieceModel& m) {
  uint32_t field, wire;
  while (r.next(field, wire)) {
    const auto bool_field = [&](bool& dst, const char* name) {
      r.expect(wire, kVarint, name);
      dst = r.varint() != 0;
    };
    switch (field) {
      case kNormName:
        r.expect(wire, kBytes, "name");
        m.normalizer_name = r.bytes("name");
        break;
      case kNormCharsmap:
        r.expect(wire, kBytes, "precompiled_charsmap");
        m.precompiled_charsmap = r.bytes("precompiled_charsmap");
        break;
      case kNormAddDummyPrefix:
        bool_field(m.add_dummy_prefix, "add_dummy_prefix");
        break;
      case kNormRemoveExtraWhitespaces:
        bool_field(m.remove_extra_whitespaces, "remove_extra_whitespaces");
        break;
      case kNormEscapeWhitespaces:
        bool_field(m.escape_whitespaces, "escape_whitespaces");
        break;
      default:
        r.skip(wire);
    }
  }
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(const uint8_t* data, size_t size,
                                             const std::string& what) {
  SentencePieceModel m;
  ProtoReader r(data, size, what);
  uint32_t field, wire;
  while (r.next(field, wire)) {
    if (field == kModelPieces) {
      r.expect(wire, kBytes, "pieces");
      m.pieces.push_back(read_piece(r.sub("piece #" + std::to_string(m.pieces.size()))));
    } else if (field == kModelTrainerSpec) {
      r.expect(wire, kBytes, "trainer_spec");
      read_trainer(r.sub("trainer_spec"), m);
    } else if (field == kModelNormalizerSpec) {
      r.expect(wire, kBytes, "normalizer_spec");
      read_normalizer(r.sub("normalizer_spec"), m);
    } else {
      r.skip(wire);
    }
  }
  if (m.pieces.empty()) r.error("no pieces");
  return m;
}

SentencePieceModel read_sentencepiece_model(const std::string& path) {
  const MappedFile file(path);
  return parse_sentencepiece_model(file.data(), file.size(), path);
}

}  // namespace ts

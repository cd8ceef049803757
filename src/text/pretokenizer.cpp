#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretokenizer.h"

#include <pcre2.h>

#include "core/error.h"
#include "core/utf8.h"

namespace ts {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf));
}

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code)
      : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr)
      fail(ErrorKind::Runtime, "pre-tokenizer: out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// Cuts `piece` into matches of `code` and the gaps between them, appending to `out`.
void split_one(const pcre2_code* code, pcre2_match_data* md, std::string_view piece,
               const std::string& pattern, std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t offset = 0;
  size_t last = 0;
  while (offset <= piece.size()) {
    // The text was validated once by the caller; re-checking it for every match would make
    // splitting quadratic in the piece length.
    const int rc =
        pcre2_match(code, subject, piece.size(), offset, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail(ErrorKind::Runtime,
           "pre-tokenizer regex '" + pattern + "' failed: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end <= start) {
      // An empty match carries no text; step over one character so the scan moves on.
      if (start >= piece.size()) break;
      const size_t n = utf8_valid_prefix(piece, start);
      offset = start + (n == 0 ? 1 : n);
      continue;
    }
    if (start > last) out.push_back(piece.substr(last, start - last));
    out.push_back(piece.substr(start, end - start));
    last = end;
    offset = end;
  }
  if (last < piece.size()) out.push_back(piece.substr(last));
}

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, const std::string& what)
    : patterns_(patterns) {
  for (const std::string& p : patterns_) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP,
                            &err, &err_offset, nullptr);
    if (c->code == nullptr) {
      fail(ErrorKind::Unsupported, what + ": pre-tokenizer regex '" + p +
                                       "' does not compile at offset " +
                                       std::to_string(err_offset) + ": " + pcre2_message(err));
    }
    // JIT is only a speed-up: when the platform has none, the interpreter gives the same matches.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (size_t i = 0; i < compiled_.size(); ++i) {
    MatchData md(compiled_[i]->code);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces)
      split_one(compiled_[i]->code, md.md, piece, patterns_[i], next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace ts

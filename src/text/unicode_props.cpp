#include "text/unicode_props.h"

#include <algorithm>
#include <iterator>

namespace ts {
namespace {

struct Range {
  uint32_t first, last;
};
struct LowerRun {
  uint32_t first, last, step;
  int32_t delta;
};
struct StripEntry {
  uint32_t cp, a, b, c;
};

#include "text/unicode_tables.inc"

template <size_t N>
bool in_ranges(const Range (&table)[N], uint32_t cp) {
  const auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                                   [](uint32_t v, const Range& r) { return v < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

// Hangul syllables decompose by formula (Unicode 3.12) into a leading consonant, a vowel and an
// optional trailing consonant.
constexpr uint32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3;
constexpr uint32_t kJamoL = 0x1100, kJamoV = 0x1161, kJamoT = 0x11A7;
constexpr uint32_t kVowels = 21, kTrailing = 28;

}  // namespace

bool is_unicode_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_unicode_punctuation(uint32_t cp) {
  return in_ranges(kPunct, cp);
}
bool is_nonspacing_mark(uint32_t cp) {
  return in_ranges(kMark, cp);
}
bool is_unicode_other(uint32_t cp) {
  return in_ranges(kOther, cp);
}

bool is_cjk_ideograph(uint32_t cp) {
  // The blocks of HF tokenizers' is_chinese_char, its 0x2B920 start included.
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_lowercase(uint32_t cp, std::u32string& out) {
  if (cp == 0x130) {  // İ: i and a combining dot above
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  const auto it = std::upper_bound(std::begin(kLower), std::end(kLower), cp,
                                   [](uint32_t v, const LowerRun& r) { return v < r.first; });
  if (it != std::begin(kLower)) {
    const LowerRun& r = *std::prev(it);
    if (cp <= r.last && (cp - r.first) % r.step == 0) {
      out.push_back(static_cast<uint32_t>(static_cast<int64_t>(cp) + r.delta));
      return;
    }
  }
  out.push_back(cp);
}

void append_without_marks(uint32_t cp, std::u32string& out) {
  if (cp >= kHangulFirst && cp <= kHangulLast) {
    const uint32_t s = cp - kHangulFirst;
    out.push_back(kJamoL + s / (kVowels * kTrailing));
    out.push_back(kJamoV + s % (kVowels * kTrailing) / kTrailing);
    if (s % kTrailing != 0) out.push_back(kJamoT + s % kTrailing);
    return;
  }
  if (is_nonspacing_mark(cp)) return;
  const auto it = std::lower_bound(std::begin(kStrip), std::end(kStrip), cp,
                                   [](const StripEntry& e, uint32_t v) { return e.cp < v; });
  if (it == std::end(kStrip) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  for (uint32_t c : {it->a, it->b, it->c})
    if (c != 0) out.push_back(c);
}

}  // namespace ts

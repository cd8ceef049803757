#include "constrain/json_constraint.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/utf8.h"

namespace ts {
namespace {

bool continues_any_string(const std::string& piece) {
  if (piece.empty() || utf8_first_invalid(piece) != std::string::npos) return false;
  for (char ch : piece) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == '"' || c == '\\' || c < 0x20) return false;
  }
  return true;
}

// `ids` in byte order of their pieces, with the shared prefix lengths.
JsonVocabulary::Sorted sorted_by_piece(const std::vector<std::string>& pieces,
                                       std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
  });
  std::vector<uint32_t> shared(ids.size(), 0);
  for (size_t i = 1; i < ids.size(); ++i) {
    const std::string& a = pieces[static_cast<size_t>(ids[i - 1])];
    const std::string& b = pieces[static_cast<size_t>(ids[i])];
    shared[i] = static_cast<uint32_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                                      a.begin());
  }
  return {std::move(ids), std::move(shared)};
}

}  // namespace

JsonVocabulary::JsonVocabulary(std::vector<std::string> token_pieces, std::vector<int32_t> eog_ids)
    : pieces(std::move(token_pieces)), eog(std::move(eog_ids)) {
  const size_t n = pieces.size();
  plain.reserve(n);
  chars.reserve(n);
  std::vector<int32_t> nonempty, not_plain_ids;
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = pieces[id];
    plain.push_back(continues_any_string(piece) ? 1 : 0);
    chars.push_back(static_cast<uint32_t>(std::count_if(piece.begin(), piece.end(), [](char c) {
      return (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    })));
    longest = std::max(longest, piece.size());
    if (piece.empty()) continue;
    nonempty.push_back(static_cast<int32_t>(id));
    if (plain.back() == 0) not_plain_ids.push_back(static_cast<int32_t>(id));
  }
  all = sorted_by_piece(pieces, std::move(nonempty));
  not_plain = sorted_by_piece(pieces, std::move(not_plain_ids));
}

template <class Recognizer, class Rules>
PrefixConstraint<Recognizer, Rules>::PrefixConstraint(std::shared_ptr<const JsonVocabulary> vocab,
                                                      std::shared_ptr<const Rules> rules)
    : vocab_(std::move(vocab)), rules_(std::move(rules)), state_(rules_.get()) {}

// The pieces in byte order, each fed from the state its shared prefix with the one before left
// (states_[k]: after k bytes). A byte refused at offset k refuses every piece that shares those
// k + 1 bytes: a block of the order, skipped with a binary search. So a step feeds about one byte
// per distinct prefix that can continue, plus one per refused one.
template <class Recognizer, class Rules>
void PrefixConstraint<Recognizer, Rules>::walk(const JsonVocabulary::Sorted& sorted) {
  const std::vector<std::string>& pieces = vocab_->pieces;
  const size_t n = sorted.ids.size();
  size_t valid = 0;  // states_[0..valid] hold the previous piece's prefix
  for (size_t i = 0; i < n;) {
    const std::string& piece = pieces[static_cast<size_t>(sorted.ids[i])];
    size_t k = std::min<size_t>(sorted.shared[i], valid);
    Recognizer p = states_[k];
    for (; k < piece.size() && p.feed(static_cast<uint8_t>(piece[k])); ++k) states_[k + 1] = p;
    valid = k;
    if (k == piece.size()) {
      allowed_[static_cast<size_t>(sorted.ids[i++])] = 1;
      continue;
    }
    const std::string_view refused(piece.data(), k + 1);
    i = static_cast<size_t>(
        std::partition_point(
            sorted.ids.begin() + static_cast<std::ptrdiff_t>(i), sorted.ids.end(),
            [&](int32_t id) {
              return std::string_view(pieces[static_cast<size_t>(id)]).substr(0, k + 1) == refused;
            }) -
        sorted.ids.begin());
  }
}

// Inside a string the plain tokens that fit its room are allowed as they are, and only the
// others are walked.
template <class Recognizer, class Rules>
void PrefixConstraint<Recognizer, Rules>::mask(std::span<float> logits) {
  const JsonVocabulary& v = *vocab_;
  states_.resize(v.longest + 1);
  states_[0] = state_;
  if (const uint32_t room = state_.plain_string_room(); room > 0) {
    if (room >= v.longest) {  // every piece fits (no piece has more characters than bytes)
      allowed_ = v.plain;
    } else {
      allowed_.resize(v.plain.size());
      for (size_t id = 0; id < v.plain.size(); ++id)
        allowed_[id] = v.plain[id] != 0 && v.chars[id] <= room;
    }
    walk(v.not_plain);
  } else {
    allowed_.assign(v.pieces.size(), 0);
    walk(v.all);
  }
  if (state_.complete())
    for (int32_t id : v.eog) allowed_[static_cast<size_t>(id)] = 1;
  const size_t known = std::min(logits.size(), allowed_.size());
  bool any = false;
  for (size_t id = 0; id < known; ++id) {
    if (allowed_[id] != 0)
      any = true;
    else
      logits[id] = -INFINITY;
  }
  for (size_t id = known; id < logits.size(); ++id) logits[id] = -INFINITY;
  if (!any)
    fail(ErrorKind::Input, "constrained JSON: no token of this vocabulary can continue the text");
}

template <class Recognizer, class Rules>
void PrefixConstraint<Recognizer, Rules>::advance(int32_t token) {
  const auto id = static_cast<size_t>(token);
  if (token < 0 || id >= vocab_->pieces.size() || vocab_->pieces[id].empty() ||
      !state_.feed_all(vocab_->pieces[id]))
    fail(ErrorKind::Runtime,
         "constrained JSON: token " + std::to_string(token) + " cannot continue the text");
}

template class PrefixConstraint<SchemaPrefix, JsonSchema>;
template class PrefixConstraint<ToolCallPrefix, ToolSet>;

}  // namespace ts

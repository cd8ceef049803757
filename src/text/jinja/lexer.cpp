#include "text/jinja/lexer.h"

#include <algorithm>
#include <cstdint>

#include "core/utf8.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

// Python's \s on ASCII.
bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}
bool name_char(char c) {
  return name_start(c) || digit(c);
}

std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

int hex_value(char c) {
  if (digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body decoded as jinja2 does (Python's unicode-escape on the body).
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'a':
        out += '\a';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\n':
        break;  // a line continuation
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) syntax_error(line, std::string("truncated \\") + c + " escape in a string");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF) syntax_error(line, "a \\U escape beyond U+10FFFF");
        utf8_append(out, cp);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = 0;
          size_t k = 0;
          for (; k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(body[i + k] - '0');
          utf8_append(out, cp);
          i += k - 1;
        } else {
          out += '\\';  // Python keeps an unknown escape as written
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t open = find_tag_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        emit(Tok::Text, text, pos_);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        text.erase(std::find_if_not(text.rbegin(), text.rend(), space).base(), text.end());
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the spaces between the line's start and a block or comment tag.
        const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), space))
          text.erase(l_pos);
      }
      emit(Tok::Text, text, pos_);
      pos_ = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        line_starting = skip_comment(open);
      } else if (kind == '%' && try_raw(open)) {
        line_starting = last_end_newline_;
      } else {
        line_starting = lex_tag(kind == '{', open);
      }
    }
    tokens_.push_back({Tok::Eof, "", line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) {
    // Positions only grow, so the count is kept incrementally.
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_;
    return line_;
  }

  void emit(Tok type, std::string text, size_t at) {
    if (type == Tok::Text && text.empty()) return;
    tokens_.push_back({type, std::move(text), line_at(at)});
  }

  size_t find_tag_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  // After a block or comment end: "-" strips all whitespace, "+" keeps it, else trim_blocks
  // drops one newline. Returns whether what was consumed ends with a newline (jinja2's
  // "line_starting", which lets lstrip_blocks act on the next tag).
  bool finish_block_end(char sign) {
    if (sign == '-') {
      const size_t start = pos_;
      while (pos_ < src_.size() && space(src_[pos_])) ++pos_;
      return pos_ > start ? src_[pos_ - 1] == '\n' : false;
    }
    if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      return true;
    }
    return false;
  }

  bool skip_comment(size_t open) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) syntax_error(line_at(open), "a comment is not closed with #}");
    const char sign = end > pos_ ? src_[end - 1] : '\0';
    pos_ = end + 2;
    return finish_block_end(sign == '-' || sign == '+' ? sign : '\0');
  }

  // {% raw %}...{% endraw %}: the text between is kept as written.
  bool try_raw(size_t open) {
    size_t p = pos_;
    while (p < src_.size() && space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && name_char(src_[p + 3])))
      return false;
    p += 3;
    while (p < src_.size() && space(src_[p])) ++p;
    char sign = '\0';
    if (p < src_.size() && src_[p] == '-') sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    pos_ = p + 2;
    finish_block_end(sign);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t q = at + 2;
      const char begin_sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q++] : 0;
      while (q < src_.size() && space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && space(src_[q])) ++q;
      char end_sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, at - pos_);
      if (begin_sign == '-')
        body.erase(std::find_if_not(body.rbegin(), body.rend(), space).base(), body.end());
      emit(Tok::Text, body, pos_);
      pos_ = q + 2;
      last_end_newline_ = finish_block_end(end_sign);
      return true;
    }
    syntax_error(line_at(open), "{% raw %} without {% endraw %}");
  }

  // The tokens of one {{ }} or {% %} tag; returns line_starting as finish_block_end does.
  bool lex_tag(bool variable, size_t open) {
    emit(variable ? Tok::VarBegin : Tok::BlockBegin, "", open);
    brackets_ = 0;
    const char closer = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        syntax_error(line_at(open),
                     variable ? "{{ is not closed with }}" : "{% is not closed with %}");
      const char c = src_[pos_];
      // The end of the tag, tried before any operator (so "-%}" is never a minus), but not
      // inside brackets, where "}}" closes a dict literal.
      if (brackets_ == 0 && (c == '-' || (c == '+' && !variable)) &&
          src_.compare(pos_ + 1, 2, std::string{closer, '}'}) == 0) {
        emit(variable ? Tok::VarEnd : Tok::BlockEnd, "", pos_);
        pos_ += 3;
        if (variable) return finish_variable_end(c);
        return finish_block_end(c);
      }
      if (brackets_ == 0 && c == closer && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
        emit(variable ? Tok::VarEnd : Tok::BlockEnd, "", pos_);
        pos_ += 2;
        if (variable) return finish_variable_end('\0');
        return finish_block_end('\0');
      }
      lex_expression_token();
    }
  }

  bool finish_variable_end(char sign) {
    if (sign != '-') return false;
    return finish_block_end('-');
  }

  void lex_expression_token() {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (name_start(c)) {
      while (pos_ < src_.size() && name_char(src_[pos_])) ++pos_;
      emit(Tok::Name, src_.substr(start, pos_ - start), start);
      return;
    }
    if (digit(c)) {
      lex_number();
      return;
    }
    if (c == '\'' || c == '"') {
      size_t p = pos_ + 1;
      while (p < src_.size() && src_[p] != c) p += src_[p] == '\\' ? 2 : 1;
      if (p >= src_.size()) syntax_error(line_at(start), "a string literal is not closed");
      emit(Tok::String,
           decode_string(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), line_at(start)),
           start);
      pos_ = p + 1;
      return;
    }
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo)
      if (src_.compare(pos_, 2, op) == 0) {
        emit(Tok::Op, op, start);
        pos_ += 2;
        return;
      }
    if (std::string_view("+-*/%~()[]{},.:|=<>;").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') ++brackets_;
      if ((c == ')' || c == ']' || c == '}') && brackets_ > 0) --brackets_;
      emit(Tok::Op, std::string(1, c), start);
      ++pos_;
      return;
    }
    syntax_error(line_at(start), "unexpected character '" + std::string(1, c) + "'");
  }

  // Integers and floats with "_" separators ("1_000", "2.5", "1e3").
  void lex_number() {
    const size_t start = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (digit(src_[pos_]) ||
              (src_[pos_] == '_' && pos_ + 1 < src_.size() && digit(src_[pos_ + 1]))))
        ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && digit(src_[p])) {
        pos_ = p;
        digits();
        is_float = true;
      }
    }
    std::string text = src_.substr(start, pos_ - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(is_float ? Tok::Float : Tok::Int, text, start);
  }

  std::string src_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
  bool last_end_newline_ = false;
  int brackets_ = 0;  // open (, [ and { in the current tag
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  std::string src = normalise_newlines(source);
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(src)).run();
}

}  // namespace ts::jinja

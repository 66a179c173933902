#include "ir/lexer.h"

#include <fmt/format.h>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace kiln::ir::lex {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

}  // namespace

std::string_view tok_name(Tok t) {
  switch (t) {
    case Tok::End: return "end of file";
    case Tok::Percent: return "a value name like %x";
    case Tok::At: return "a graph name like @g";
    case Tok::Ident: return "a name";
    case Tok::Int: return "an integer";
    case Tok::Float: return "a number";
    case Tok::String: return "a string";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Equal: return "'='";
    case Tok::Arrow: return "'->'";
  }
  return "?";
}

Token Lexer::next() {
  skip_space();
  Token t;
  t.loc = {line_, col_};
  if (pos_ >= text_.size()) return t;
  char c = text_[pos_];
  auto single = [&](Tok k) {
    advance();
    t.kind = k;
    return t;
  };
  switch (c) {
    case '(': return single(Tok::LParen);
    case ')': return single(Tok::RParen);
    case '{': return single(Tok::LBrace);
    case '}': return single(Tok::RBrace);
    case '[': return single(Tok::LBracket);
    case ']': return single(Tok::RBracket);
    case ',': return single(Tok::Comma);
    case ':': return single(Tok::Colon);
    case '=': return single(Tok::Equal);
    case '"': return string_token(t);
    case '%':
    case '@': {
      advance();
      t.kind = c == '%' ? Tok::Percent : Tok::At;
      t.text = name_chars(t.loc);
      if (t.text.empty()) throw ParseError{t.loc, fmt::format("expected a name after '{}'", c)};
      return t;
    }
    default: break;
  }
  if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
    advance();
    advance();
    t.kind = Tok::Arrow;
    return t;
  }
  if ((c >= '0' && c <= '9') || c == '-' || c == '+') return number(t);
  if (is_name_char(c)) {
    t.kind = Tok::Ident;
    t.text = name_chars(t.loc);
    if (t.text == "inf" || t.text == "nan") {
      t.kind = Tok::Float;
      t.float_value = t.text == "inf" ? INFINITY : NAN;
    }
    return t;
  }
  unsigned char u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f)
    throw ParseError{t.loc, fmt::format("unexpected byte 0x{:02x}; a .kir file is ASCII text", u)};
  throw ParseError{t.loc, fmt::format("unexpected character '{}'", c)};
}

void Lexer::advance() {
  if (text_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skip_space() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') advance();
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else {
      break;
    }
  }
}

std::string_view Lexer::name_chars(Location loc) {
  size_t start = pos_;
  while (pos_ < text_.size() && is_name_char(text_[pos_])) advance();
  if (pos_ - start > limits_.max_identifier)
    throw ParseError{loc, fmt::format("name is {} characters long, more than the limit of {}", pos_ - start,
                                      limits_.max_identifier)};
  return text_.substr(start, pos_ - start);
}

Token Lexer::number(Token& t) {
  size_t start = pos_;
  if (text_[pos_] == '-' || text_[pos_] == '+') advance();
  if (pos_ + 3 <= text_.size() && (text_.substr(pos_, 3) == "inf" || text_.substr(pos_, 3) == "nan")) {
    bool nan = text_[pos_] == 'n';
    for (int i = 0; i < 3; ++i) advance();
    t.kind = Tok::Float;
    t.float_value = nan ? NAN : (text_[start] == '-' ? -INFINITY : INFINITY);
    t.text = text_.substr(start, pos_ - start);
    return t;
  }
  bool is_float = false;
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c >= '0' && c <= '9') {
      advance();
    } else if (c == '.' || c == 'e' || c == 'E') {
      is_float = true;
      advance();
      if ((c == 'e' || c == 'E') && pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) advance();
    } else {
      break;
    }
  }
  t.text = text_.substr(start, pos_ - start);
  std::string_view digits = t.text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  const char* first = digits.data();
  const char* last = digits.data() + digits.size();
  if (!is_float) {
    auto [ptr, ec] = std::from_chars(first, last, t.int_value);
    if (ec == std::errc::result_out_of_range)
      throw ParseError{t.loc, fmt::format("integer {} does not fit in 64 bits", t.text)};
    if (ec != std::errc() || ptr != last) throw ParseError{t.loc, fmt::format("malformed number '{}'", t.text)};
    t.kind = Tok::Int;
    return t;
  }
  auto [ptr, ec] = std::from_chars(first, last, t.float_value);
  if (ec == std::errc::result_out_of_range) {
    // Overflow to infinity, underflow to zero, as strtod does.
    t.float_value = std::strtod(std::string(digits).c_str(), nullptr);
  } else if (ec != std::errc() || ptr != last) {
    throw ParseError{t.loc, fmt::format("malformed number '{}'", t.text)};
  }
  t.kind = Tok::Float;
  return t;
}

Token Lexer::string_token(Token& t) {
  advance();
  t.kind = Tok::String;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') throw ParseError{t.loc, "unterminated string"};
    char c = text_[pos_];
    advance();
    if (c == '"') return t;
    if (c != '\\') {
      t.str += c;
      continue;
    }
    if (pos_ >= text_.size()) throw ParseError{t.loc, "unterminated string"};
    char e = text_[pos_];
    advance();
    if (e == '"' || e == '\\') {
      t.str += e;
      continue;
    }
    if (e == 'x' && pos_ + 2 <= text_.size()) {
      unsigned value = 0;
      auto [ptr, ec] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 2, value, 16);
      if (ec == std::errc() && ptr == text_.data() + pos_ + 2) {
        advance();
        advance();
        t.str += static_cast<char>(value);
        continue;
      }
    }
    throw ParseError{t.loc, "bad escape in string (expected \\\", \\\\ or \\xHH)"};
  }
}

}  // namespace kiln::ir::lex

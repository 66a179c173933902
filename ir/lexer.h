// The lexer of the text IR: tokens with their locations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/parser.h"

namespace kiln::ir::lex {

/// Token kinds.
enum class Tok {
  End,
  Percent,
  At,
  Ident,
  Int,
  Float,
  String,
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
  Arrow
};

/// What a token kind is, for "expected X" messages.
std::string_view tok_name(Tok t);

/// One token.
struct Token {
  Tok kind = Tok::End;
  std::string_view text;  ///< identifier or name without its sigil; raw number text
  std::string str;        ///< decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  Location loc;
};

/// A parse error. It travels as an exception inside the parser only; parse() turns it
/// into an Error value, so nothing escapes the API.
struct ParseError {
  Location loc;
  std::string message;
};

/// Splits text into tokens, skipping whitespace and '#' comments; throws ParseError.
class Lexer {
 public:
  Lexer(std::string_view text, const ParseLimits& limits) : text_(text), limits_(limits) {}
  /// The next token (Tok::End at the end of the input).
  Token next();

 private:
  void advance();
  void skip_space();
  std::string_view name_chars(Location loc);
  Token number(Token& t);
  Token string_token(Token& t);

  std::string_view text_;
  const ParseLimits& limits_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace kiln::ir::lex

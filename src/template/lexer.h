// Jinja lexer: template text -> tokens, each carrying the template line it came from.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::jinja {

enum class Tok {
  kText,
  kComment,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,
  kMultiplicative,
  kPower,
  kComparison,
  kUnary
};

struct Token {
  Tok type;
  std::string value;
  int line;
};

// Tokenizes with the reference engine's settings: lstrip_blocks and trim_blocks on, one trailing
// newline dropped, `{% generation %}` markers removed, `-` whitespace control. Throws Error.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace lockstep::jinja

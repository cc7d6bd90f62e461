// The Jinja parser's class, shared by its statement half (parser.cpp) and its expression half
// (parser_expr.cpp).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "template/ast.h"
#include "template/lexer.h"

namespace lockstep::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::vector<Stmt> Program() {
    std::vector<Stmt> out;
    while (pos_ < t_.size()) out.push_back(Any());
    return out;
  }

 private:
  int Line() const {
    if (t_.empty()) return 1;
    return pos_ < t_.size() ? t_[pos_].line : t_.back().line;
  }
  [[noreturn]] void Fail(const std::string& m) const { throw Error(m, Line()); }
  bool Is(Tok type, size_t ahead = 0) const {
    return pos_ + ahead < t_.size() && t_[pos_ + ahead].type == type;
  }
  bool IsWord(std::string_view w, size_t ahead = 0) const {
    return Is(Tok::kIdentifier, ahead) && t_[pos_ + ahead].value == w;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!Is(Tok::kOpenStatement) || !Is(Tok::kIdentifier, 1)) return false;
    for (auto n : names)
      if (t_[pos_ + 1].value == n) return true;
    return false;
  }
  const Token& Expect(Tok type, const char* what) {
    if (!Is(type))
      Fail(pos_ < t_.size() ? fmt::format("expected {}, found '{}'", what, t_[pos_].value)
                            : fmt::format("expected {}, found the end of the template", what));
    return t_[pos_++];
  }
  void ExpectWord(std::string_view w) {
    if (!IsWord(w)) Fail(fmt::format("expected '{}'", w));
    ++pos_;
  }
  ExprPtr Node(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  Stmt Any();
  Stmt Statement();
  // Statements up to one of `ends` (not consumed); `opener` names the block in the error.
  std::vector<Stmt> Block(std::initializer_list<std::string_view> ends, const char* opener,
                          int line);
  void EndTag(std::string_view name);
  static Stmt NewStmt(Stmt::Kind kind, int line);
  // After `{% else`: the branch's statements up to `end` (not consumed).
  std::vector<Stmt> ElseBranch(std::string_view end, const char* opener, int line);
  Stmt Set(int line);
  Stmt If(int line);
  Stmt For(int line);
  Stmt Macro(int line);
  Stmt CallBlock(int line);
  Stmt FilterBlock(int line);

  ExprPtr Expression();
  ExprPtr Sequence(bool primary);
  // A filter's or test's name (refused unless `known`) and its optional (arguments).
  void NameAndArgs(Expr& e, const char* what, bool (*known)(std::string_view));
  ExprPtr BinaryLevel(Tok type, std::string_view word, ExprPtr (Parser::*next)());
  ExprPtr Or();
  ExprPtr And();
  ExprPtr Not();
  ExprPtr Comparison();
  ExprPtr Additive();
  ExprPtr Multiplicative();
  ExprPtr Power();
  ExprPtr TestExpr();
  ExprPtr FilterExpr();
  ExprPtr UnarySign();
  ExprPtr CallMember();
  ExprPtr Call(ExprPtr callee);
  ExprPtr Member(ExprPtr object);
  ExprPtr Subscript();
  ExprPtr Primary();
  std::vector<ExprPtr> ArgList(bool parameters);

  // Bounds the recursion, so a hostile template fails with a message instead of overflowing the
  // stack.
  struct Nest {
    Nest(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.Fail("nested too deeply");
    }
    ~Nest() { --parser.depth_; }
    Parser& parser;
  };
  static constexpr int kMaxDepth = 200;

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace lockstep::jinja

// Jinja parser, statements: recursive descent over the lexer's tokens; a block's missing end tag
// names the line that opened it.
#include "template/parser.h"

namespace lockstep::jinja {

Stmt Parser::Any() {
  const Token& tok = t_[pos_];
  Stmt s;
  s.line = tok.line;
  switch (tok.type) {
    case Tok::kComment:
      s.kind = Stmt::Kind::kComment, ++pos_;
      return s;
    case Tok::kText:
      s.kind = Stmt::Kind::kText, s.text = tok.value, ++pos_;
      return s;
    case Tok::kOpenStatement:
      return Statement();
    case Tok::kOpenExpression:
      ++pos_;
      s.kind = Stmt::Kind::kOutput;
      s.expr = Expression();
      Expect(Tok::kCloseExpression, "'}}'");
      return s;
    default:
      Fail(fmt::format("unexpected '{}' outside a tag", tok.value));
  }
}

std::vector<Stmt> Parser::Block(std::initializer_list<std::string_view> ends, const char* opener,
                                int line) {
  std::vector<Stmt> body;
  while (!IsStatement(ends)) {
    if (pos_ >= t_.size())
      throw Error(
          fmt::format("missing {{% end{} %}} for the '{}' opened on line {}", opener, opener, line),
          line);
    body.push_back(Any());
  }
  return body;
}

Stmt Parser::NewStmt(Stmt::Kind kind, int line) {
  Stmt s;
  s.kind = kind;
  s.line = line;
  return s;
}

std::vector<Stmt> Parser::ElseBranch(std::string_view end, const char* opener, int line) {
  pos_ += 2;  // {% else
  Expect(Tok::kCloseStatement, "'%}'");
  return Block({end}, opener, line);
}

void Parser::EndTag(std::string_view name) {
  Expect(Tok::kOpenStatement, "'{%'");
  ExpectWord(name);
  Expect(Tok::kCloseStatement, "'%}'");
}

Stmt Parser::Statement() {
  const Nest nest(*this);
  const int line = Line();
  ++pos_;  // {%
  if (!Is(Tok::kIdentifier)) Fail("expected a statement name after '{%'");
  const std::string name = t_[pos_++].value;
  if (name == "set") return Set(line);
  if (name == "if") return If(line);
  if (name == "for") return For(line);
  if (name == "macro") return Macro(line);
  if (name == "call") return CallBlock(line);
  if (name == "filter") return FilterBlock(line);
  if (name == "break" || name == "continue") {
    Expect(Tok::kCloseStatement, "'%}'");
    return NewStmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
  }
  pos_ -= 1;
  Fail(fmt::format("unknown statement '{{% {} %}}'", name));
}

Stmt Parser::Set(int line) {
  Stmt s = NewStmt(Stmt::Kind::kSet, line);
  s.target = Sequence(false);
  if (Is(Tok::kEquals)) {
    ++pos_;
    s.expr = Sequence(false);
  } else {
    Expect(Tok::kCloseStatement, "'=' or '%}'");
    s.body = Block({"endset"}, "set", line);
    pos_ += 2;  // {% endset
  }
  Expect(Tok::kCloseStatement, "'%}'");
  return s;
}

Stmt Parser::If(int line) {
  Stmt s = NewStmt(Stmt::Kind::kIf, line);
  s.expr = Expression();
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"elif", "else", "endif"}, "if", line);
  if (IsStatement({"elif"})) {
    const int elif_line = Line();
    pos_ += 2;
    s.alternate.push_back(If(elif_line));  // consumes the shared endif
    return s;
  }
  if (IsStatement({"else"})) s.alternate = ElseBranch("endif", "if", line);
  EndTag("endif");
  return s;
}

Stmt Parser::For(int line) {
  Stmt s = NewStmt(Stmt::Kind::kFor, line);
  s.target = Sequence(true);
  if (s.target->kind != Expr::Kind::kIdentifier && s.target->kind != Expr::Kind::kTuple)
    Fail("expected a loop variable or a tuple of them after 'for'");
  ExpectWord("in");
  s.expr = Expression();
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endfor", "else"}, "for", line);
  if (IsStatement({"else"})) s.alternate = ElseBranch("endfor", "for", line);
  EndTag("endfor");
  return s;
}

Stmt Parser::Macro(int line) {
  Stmt s = NewStmt(Stmt::Kind::kMacro, line);
  if (!Is(Tok::kIdentifier)) Fail("expected a macro name");
  s.text = t_[pos_++].value;
  Expect(Tok::kOpenParen, "'(' after the macro name");
  s.params = ArgList(true);
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endmacro"}, "macro", line);
  EndTag("endmacro");
  return s;
}

Stmt Parser::CallBlock(int line) {
  Stmt s = NewStmt(Stmt::Kind::kCallBlock, line);
  if (Is(Tok::kOpenParen)) ++pos_, s.params = ArgList(true);
  if (!Is(Tok::kIdentifier)) Fail("expected a macro name after 'call'");
  auto callee = Node(Expr::Kind::kIdentifier, Line());
  callee->name = t_[pos_++].value;
  Expect(Tok::kOpenParen, "'(' after the called macro");
  auto call = Node(Expr::Kind::kCall, line);
  call->a = std::move(callee);
  call->items = ArgList(false);
  s.expr = std::move(call);
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endcall"}, "call", line);
  EndTag("endcall");
  return s;
}

Stmt Parser::FilterBlock(int line) {
  Stmt s = NewStmt(Stmt::Kind::kFilterBlock, line);
  auto f = Node(Expr::Kind::kFilter, line);
  NameAndArgs(*f, "filter", IsKnownFilter);
  s.expr = std::move(f);
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endfilter"}, "filter", line);
  EndTag("endfilter");
  return s;
}

std::vector<Stmt> Parse(std::string_view source) {
  return Parser(Tokenize(source)).Program();
}

}  // namespace lockstep::jinja

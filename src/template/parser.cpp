// Jinja parser: recursive descent over the lexer's tokens with the reference engine's operator
// precedence (filters bind tighter than `is`, which binds tighter than arithmetic).
#include <fmt/format.h>

#include "template/ast.h"
#include "template/lexer.h"

namespace lockstep::jinja {
namespace {

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
  Stmt Set(int line);
  Stmt If(int line);
  Stmt For(int line);
  Stmt Macro(int line);
  Stmt CallBlock(int line);
  Stmt FilterBlock(int line);

  ExprPtr Expression();
  ExprPtr Sequence(bool primary);
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

  std::vector<Token> t_;
  size_t pos_ = 0;
};

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
    case Tok::kOpenStatement: return Statement();
    case Tok::kOpenExpression:
      ++pos_;
      s.kind = Stmt::Kind::kOutput;
      s.expr = Expression();
      Expect(Tok::kCloseExpression, "'}}'");
      return s;
    default: Fail(fmt::format("unexpected '{}' outside a tag", tok.value));
  }
}

std::vector<Stmt> Parser::Block(std::initializer_list<std::string_view> ends, const char* opener,
                                int line) {
  std::vector<Stmt> body;
  while (!IsStatement(ends)) {
    if (pos_ >= t_.size())
      throw Error(fmt::format("missing {{% end{} %}} for the '{}' opened on line {}", opener,
                              opener, line),
                  line);
    body.push_back(Any());
  }
  return body;
}

void Parser::EndTag(std::string_view name) {
  Expect(Tok::kOpenStatement, "'{%'");
  ExpectWord(name);
  Expect(Tok::kCloseStatement, "'%}'");
}

Stmt Parser::Statement() {
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
    Stmt s;
    s.kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    s.line = line;
    return s;
  }
  pos_ -= 1;
  Fail(fmt::format("unknown statement '{{% {} %}}'", name));
}

Stmt Parser::Set(int line) {
  Stmt s;
  s.kind = Stmt::Kind::kSet;
  s.line = line;
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
  Stmt s;
  s.kind = Stmt::Kind::kIf;
  s.line = line;
  s.expr = Expression();
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"elif", "else", "endif"}, "if", line);
  if (IsStatement({"elif"})) {
    const int elif_line = Line();
    pos_ += 2;
    s.alternate.push_back(If(elif_line));  // consumes the shared endif
    return s;
  }
  if (IsStatement({"else"})) {
    pos_ += 2;
    Expect(Tok::kCloseStatement, "'%}'");
    s.alternate = Block({"endif"}, "if", line);
  }
  EndTag("endif");
  return s;
}

Stmt Parser::For(int line) {
  Stmt s;
  s.kind = Stmt::Kind::kFor;
  s.line = line;
  s.target = Sequence(true);
  if (s.target->kind != Expr::Kind::kIdentifier && s.target->kind != Expr::Kind::kTuple)
    Fail("expected a loop variable or a tuple of them after 'for'");
  ExpectWord("in");
  s.expr = Expression();
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endfor", "else"}, "for", line);
  if (IsStatement({"else"})) {
    pos_ += 2;
    Expect(Tok::kCloseStatement, "'%}'");
    s.alternate = Block({"endfor"}, "for", line);
  }
  EndTag("endfor");
  return s;
}

Stmt Parser::Macro(int line) {
  Stmt s;
  s.kind = Stmt::Kind::kMacro;
  s.line = line;
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
  Stmt s;
  s.kind = Stmt::Kind::kCallBlock;
  s.line = line;
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
  Stmt s;
  s.kind = Stmt::Kind::kFilterBlock;
  s.line = line;
  if (!Is(Tok::kIdentifier)) Fail("expected a filter name");
  auto f = Node(Expr::Kind::kFilter, line);
  f->name = t_[pos_++].value;
  if (!IsKnownFilter(f->name)) Fail(fmt::format("unknown filter '{}'", f->name));
  if (Is(Tok::kOpenParen)) ++pos_, f->items = ArgList(false);
  s.expr = std::move(f);
  Expect(Tok::kCloseStatement, "'%}'");
  s.body = Block({"endfilter"}, "filter", line);
  EndTag("endfilter");
  return s;
}

ExprPtr Parser::Expression() {
  ExprPtr a = Or();
  if (!IsWord("if")) return a;
  const int line = Line();
  ++pos_;
  ExprPtr test = Or();
  if (IsWord("else")) {
    ++pos_;
    auto t = Node(Expr::Kind::kTernary, line);
    t->a = std::move(a), t->b = std::move(test), t->c = Expression();
    return t;
  }
  auto s = Node(Expr::Kind::kSelect, line);
  s->a = std::move(a), s->b = std::move(test);
  return s;
}

ExprPtr Parser::Sequence(bool primary) {
  const int line = Line();
  ExprPtr first = primary ? Primary() : Expression();
  if (!Is(Tok::kComma)) return first;
  auto tuple = Node(Expr::Kind::kTuple, line);
  tuple->items.push_back(std::move(first));
  while (Is(Tok::kComma)) {
    ++pos_;
    tuple->items.push_back(primary ? Primary() : Expression());
  }
  return tuple;
}

ExprPtr Parser::Or() {
  ExprPtr left = And();
  while (IsWord("or")) {
    auto b = Node(Expr::Kind::kBinary, Line());
    ++pos_;
    b->name = "or", b->a = std::move(left), b->b = And();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::And() {
  ExprPtr left = Not();
  while (IsWord("and")) {
    auto b = Node(Expr::Kind::kBinary, Line());
    ++pos_;
    b->name = "and", b->a = std::move(left), b->b = Not();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::Not() {
  if (!IsWord("not")) return Comparison();
  auto u = Node(Expr::Kind::kUnary, Line());
  ++pos_;
  u->name = "not", u->a = Not();
  return u;
}

ExprPtr Parser::Comparison() {
  ExprPtr left = Additive();
  while (true) {
    std::string op;
    if (IsWord("not") && IsWord("in", 1))
      op = "not in", pos_ += 2;
    else if (IsWord("in") || Is(Tok::kComparison))
      op = t_[pos_++].value;
    else
      return left;
    auto b = Node(Expr::Kind::kBinary, t_[pos_ - 1].line);
    b->name = op, b->a = std::move(left), b->b = Additive();
    left = std::move(b);
  }
}

ExprPtr Parser::Additive() {
  ExprPtr left = Multiplicative();
  while (Is(Tok::kAdditive)) {
    auto b = Node(Expr::Kind::kBinary, Line());
    b->name = t_[pos_++].value, b->a = std::move(left), b->b = Multiplicative();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::Multiplicative() {
  ExprPtr left = Power();
  while (Is(Tok::kMultiplicative)) {
    auto b = Node(Expr::Kind::kBinary, Line());
    b->name = t_[pos_++].value, b->a = std::move(left), b->b = Power();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::Power() {
  ExprPtr left = TestExpr();
  while (Is(Tok::kPower)) {
    auto b = Node(Expr::Kind::kBinary, Line());
    b->name = t_[pos_++].value, b->a = std::move(left), b->b = TestExpr();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::TestExpr() {
  ExprPtr operand = FilterExpr();
  while (IsWord("is")) {
    auto t = Node(Expr::Kind::kTest, Line());
    ++pos_;
    if (IsWord("not")) t->negate = true, ++pos_;
    if (!Is(Tok::kIdentifier)) Fail("expected a test name after 'is'");
    t->name = t_[pos_++].value;
    if (!IsKnownTest(t->name)) Fail(fmt::format("unknown test '{}'", t->name));
    if (Is(Tok::kOpenParen)) ++pos_, t->items = ArgList(false);
    t->a = std::move(operand);
    operand = std::move(t);
  }
  return operand;
}

ExprPtr Parser::FilterExpr() {
  ExprPtr operand = UnarySign();
  while (Is(Tok::kPipe)) {
    ++pos_;
    auto f = Node(Expr::Kind::kFilter, Line());
    if (!Is(Tok::kIdentifier)) Fail("expected a filter name after '|'");
    f->name = t_[pos_++].value;
    if (!IsKnownFilter(f->name)) Fail(fmt::format("unknown filter '{}'", f->name));
    if (Is(Tok::kOpenParen)) ++pos_, f->items = ArgList(false);
    f->a = std::move(operand);
    operand = std::move(f);
  }
  return operand;
}

ExprPtr Parser::UnarySign() {
  if ((Is(Tok::kUnary) || Is(Tok::kAdditive)) && (t_[pos_].value == "-" || t_[pos_].value == "+")) {
    auto u = Node(Expr::Kind::kUnary, Line());
    u->name = t_[pos_++].value;
    u->a = UnarySign();
    return u;
  }
  return CallMember();
}

ExprPtr Parser::CallMember() {
  ExprPtr member = Member(Primary());
  return Is(Tok::kOpenParen) ? Call(std::move(member)) : std::move(member);
}

ExprPtr Parser::Call(ExprPtr callee) {
  auto call = Node(Expr::Kind::kCall, Line());
  ++pos_;  // (
  call->a = std::move(callee);
  call->items = ArgList(false);
  ExprPtr e = Member(std::move(call));
  return Is(Tok::kOpenParen) ? Call(std::move(e)) : std::move(e);
}

ExprPtr Parser::Member(ExprPtr object) {
  while (Is(Tok::kDot) || Is(Tok::kOpenBracket)) {
    auto m = Node(Expr::Kind::kMember, Line());
    m->computed = t_[pos_++].type == Tok::kOpenBracket;
    if (m->computed) {
      m->b = Subscript();
      Expect(Tok::kCloseBracket, "']'");
    } else {
      m->b = Primary();
      const bool index = m->b->kind == Expr::Kind::kLiteral && m->b->literal.kind() == Value::Kind::kInt;
      if (m->b->kind != Expr::Kind::kIdentifier && !index)
        Fail("expected a name or an integer after '.'");
    }
    m->a = std::move(object);
    object = std::move(m);
  }
  return object;
}

// The inside of `[...]`: an expression or a slice `start:stop:step` with optional parts.
ExprPtr Parser::Subscript() {
  const int line = Line();
  std::vector<ExprPtr> parts;
  bool slice = false;
  while (!Is(Tok::kCloseBracket)) {
    if (pos_ >= t_.size()) Fail("expected ']'");
    if (Is(Tok::kColon)) {
      parts.push_back(nullptr), ++pos_, slice = true;
      continue;
    }
    parts.push_back(Expression());
    if (Is(Tok::kColon)) ++pos_, slice = true;
  }
  if (parts.empty()) Fail("expected an index or a slice inside '[]'");
  if (!slice) return std::move(parts[0]);
  if (parts.size() > 3) Fail("a slice takes at most 3 parts");
  auto s = Node(Expr::Kind::kSlice, line);
  parts.resize(3);
  s->a = std::move(parts[0]), s->b = std::move(parts[1]), s->c = std::move(parts[2]);
  return s;
}

ExprPtr Parser::Primary() {
  if (pos_ >= t_.size()) Fail("expected an expression, found the end of the template");
  const Token& tok = t_[pos_++];
  switch (tok.type) {
    case Tok::kNumber: {
      auto e = Node(Expr::Kind::kLiteral, tok.line);
      const double d = std::stod(tok.value);
      e->literal = tok.value.find('.') != std::string::npos ? Value::Float(d) : Value::Int(d);
      return e;
    }
    case Tok::kString: {
      auto e = Node(Expr::Kind::kLiteral, tok.line);
      std::string s = tok.value;
      while (Is(Tok::kString)) s += t_[pos_++].value;  // 'a' 'b' is 'ab'
      e->literal = Value::String(std::move(s));
      return e;
    }
    case Tok::kIdentifier: {
      auto e = Node(Expr::Kind::kIdentifier, tok.line);
      e->name = tok.value;
      return e;
    }
    case Tok::kOpenParen: {
      ExprPtr e = Sequence(false);
      Expect(Tok::kCloseParen, "')'");
      return e;
    }
    case Tok::kOpenBracket: {
      auto e = Node(Expr::Kind::kArray, tok.line);
      while (!Is(Tok::kCloseBracket)) {
        e->items.push_back(Expression());
        if (Is(Tok::kComma)) ++pos_;
        else if (!Is(Tok::kCloseBracket)) Fail("expected ',' or ']' in a list");
      }
      ++pos_;
      return e;
    }
    case Tok::kOpenBrace: {
      auto e = Node(Expr::Kind::kObject, tok.line);
      while (!Is(Tok::kCloseBrace)) {
        e->items.push_back(Expression());
        Expect(Tok::kColon, "':' between a key and its value");
        e->items.push_back(Expression());
        if (Is(Tok::kComma)) ++pos_;
        else if (!Is(Tok::kCloseBrace)) Fail("expected ',' or '}' in a mapping");
      }
      ++pos_;
      return e;
    }
    default: --pos_, Fail(fmt::format("unexpected '{}' in an expression", tok.value));
  }
}

// After '(' up to and including ')': positional arguments, then name=value ones.
std::vector<ExprPtr> Parser::ArgList(bool parameters) {
  std::vector<ExprPtr> args;
  bool keyword_seen = false;
  while (!Is(Tok::kCloseParen)) {
    if (pos_ >= t_.size()) Fail("expected ')'");
    if (Is(Tok::kMultiplicative) || Is(Tok::kPower))
      Fail("argument unpacking (* and **) is not supported");
    ExprPtr arg = Expression();
    if (Is(Tok::kEquals)) {
      ++pos_;
      if (arg->kind != Expr::Kind::kIdentifier) Fail("expected a name before '='");
      auto kw = Node(Expr::Kind::kKeyword, arg->line);
      kw->name = arg->name;
      kw->a = Expression();
      arg = std::move(kw);
      keyword_seen = true;
    } else if (keyword_seen) {
      Fail(parameters ? "a parameter without a default follows one with a default"
                      : "a positional argument follows a keyword argument");
    } else if (parameters && arg->kind != Expr::Kind::kIdentifier) {
      Fail("expected a parameter name");
    }
    args.push_back(std::move(arg));
    if (Is(Tok::kComma)) ++pos_;
    else if (!Is(Tok::kCloseParen)) Fail("expected ',' or ')' in an argument list");
  }
  ++pos_;
  return args;
}

}  // namespace

std::vector<Stmt> Parse(std::string_view source) { return Parser(Tokenize(source)).Program(); }

}  // namespace lockstep::jinja

// Jinja parser, expressions, with the reference engine's operator precedence: filters bind
// tighter than `is`, which binds tighter than arithmetic; `a if b` without else is undefined.
#include "template/parser.h"

namespace lockstep::jinja {

ExprPtr Parser::Expression() {
  const Nest nest(*this);
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

// A left-associative level: operands from `next`, joined by the word `word` (when not empty)
// or by any token of `type`; the operator is the token's text.
ExprPtr Parser::BinaryLevel(Tok type, std::string_view word, ExprPtr (Parser::*next)()) {
  ExprPtr left = (this->*next)();
  while (word.empty() ? Is(type) : IsWord(word)) {
    auto b = Node(Expr::Kind::kBinary, Line());
    b->name = t_[pos_++].value, b->a = std::move(left), b->b = (this->*next)();
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::Or() {
  return BinaryLevel(Tok::kIdentifier, "or", &Parser::And);
}

ExprPtr Parser::And() {
  return BinaryLevel(Tok::kIdentifier, "and", &Parser::Not);
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
  return BinaryLevel(Tok::kAdditive, "", &Parser::Multiplicative);
}

ExprPtr Parser::Multiplicative() {
  return BinaryLevel(Tok::kMultiplicative, "", &Parser::Power);
}

ExprPtr Parser::Power() {
  return BinaryLevel(Tok::kPower, "", &Parser::TestExpr);
}

ExprPtr Parser::TestExpr() {
  ExprPtr operand = FilterExpr();
  while (IsWord("is")) {
    auto t = Node(Expr::Kind::kTest, Line());
    ++pos_;
    if (IsWord("not")) t->negate = true, ++pos_;
    NameAndArgs(*t, "test", IsKnownTest);
    t->a = std::move(operand);
    operand = std::move(t);
  }
  return operand;
}

void Parser::NameAndArgs(Expr& e, const char* what, bool (*known)(std::string_view)) {
  if (!Is(Tok::kIdentifier)) Fail(fmt::format("expected a {} name", what));
  e.name = t_[pos_++].value;
  if (!known(e.name)) Fail(fmt::format("unknown {} '{}'", what, e.name));
  if (Is(Tok::kOpenParen)) ++pos_, e.items = ArgList(false);
}

ExprPtr Parser::FilterExpr() {
  ExprPtr operand = UnarySign();
  while (Is(Tok::kPipe)) {
    ++pos_;
    auto f = Node(Expr::Kind::kFilter, Line());
    NameAndArgs(*f, "filter", IsKnownFilter);
    f->a = std::move(operand);
    operand = std::move(f);
  }
  return operand;
}

ExprPtr Parser::UnarySign() {
  const Nest nest(*this);
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
      const bool index =
          m->b->kind == Expr::Kind::kLiteral && m->b->literal.kind() == Value::Kind::kInt;
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
        if (Is(Tok::kComma))
          ++pos_;
        else if (!Is(Tok::kCloseBracket))
          Fail("expected ',' or ']' in a list");
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
        if (Is(Tok::kComma))
          ++pos_;
        else if (!Is(Tok::kCloseBrace))
          Fail("expected ',' or '}' in a mapping");
      }
      ++pos_;
      return e;
    }
    default:
      --pos_, Fail(fmt::format("unexpected '{}' in an expression", tok.value));
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
    if (Is(Tok::kComma))
      ++pos_;
    else if (!Is(Tok::kCloseParen))
      Fail("expected ',' or ')' in an argument list");
  }
  ++pos_;
  return args;
}

}  // namespace lockstep::jinja

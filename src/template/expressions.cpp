// The Jinja evaluator's expressions: operators with JavaScript's rules as the reference engine
// applies them, member access, calls, filters and tests.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/interpreter.h"

namespace lockstep::jinja {
namespace {

bool NumberLike(const Value& v) {
  return v.is_number() || v.kind() == Value::Kind::kBool;
}
double NumberOf(const Value& v) {
  return v.is_number() ? v.number() : v.boolean();
}

// `a op b` for two numbers; the result is a float when either operand is.
Value Arithmetic(const std::string& op, const Value& l, const Value& r) {
  const double a = l.number(), b = r.number();
  const bool fl = l.kind() == Value::Kind::kFloat || r.kind() == Value::Kind::kFloat;
  const auto num = [fl](double x) { return fl ? Value::Float(x) : Value::Int(x); };
  if (op == "+") return num(a + b);
  if (op == "-") return num(a - b);
  if (op == "*") return num(a * b);
  if (op == "/") return Value::Float(a / b);
  if (op == "//") return num(std::floor(a / b));
  if (op == "%") return num(std::fmod(a, b));
  if (op == "<") return Value::Bool(a < b);
  if (op == ">") return Value::Bool(a > b);
  if (op == "<=") return Value::Bool(a <= b);
  if (op == ">=") return Value::Bool(a >= b);
  return Value();
}

Value Power(const Value& l, const Value& r) {
  const double a = NumberOf(l), b = NumberOf(r);
  if (a == 0 && b < 0) throw Error("0 cannot be raised to a negative power");
  const double x = std::pow(a, b);
  if (!std::isfinite(x)) throw Error("'**' gives a number that is not finite");
  const bool fl = l.kind() == Value::Kind::kFloat || r.kind() == Value::Kind::kFloat || b < 0;
  return fl ? Value::Float(x) : Value::Int(x);
}

// Membership (`in`, `not in`); nullopt when the operand types have no membership.
std::optional<bool> Contains(const Value& item, const Value& container) {
  if (container.is_array())
    return std::any_of(container.array().begin(), container.array().end(),
                       [&](const Value& e) { return StrictEquals(e, item); });
  if (item.is_string() && container.is_string())
    return container.str().find(item.str()) != std::string::npos;
  if (item.is_string() && container.is_object()) return container.Find(item.str()) != nullptr;
  return std::nullopt;
}

// The UTF-16 unit at `i` (negative from the end) as UTF-8, as JavaScript indexes strings.
Value StringIndex(const std::string& s, double i) {
  const std::u16string u = ToUtf16(s);
  const double at = i < 0 ? static_cast<double>(u.size()) + i : i;
  if (at < 0 || at >= static_cast<double>(u.size())) return Value();
  return Value::String(Utf8(u[static_cast<size_t>(at)]));  // a lone surrogate: U+FFFD
}

// A readable name for the callee in "is not callable" errors.
std::string Describe(const Expr& e) {
  if (e.kind == Expr::Kind::kIdentifier) return "'" + e.name + "'";
  if (e.kind == Expr::Kind::kMember && !e.computed && e.b->kind == Expr::Kind::kIdentifier)
    return "'" + e.b->name + "'";
  return "this expression";
}

}  // namespace

Value Interpreter::EvalBinary(const Expr& e, Scope& scope) {
  const std::string& op = e.name;
  const Value l = Eval(*e.a, scope);
  if (op == "and") return l.Truthy() ? Eval(*e.b, scope) : l;
  if (op == "or") return l.Truthy() ? l : Eval(*e.b, scope);
  const Value r = Eval(*e.b, scope);
  if (op == "==") return Value::Bool(LooseEquals(l, r));
  if (op == "!=") return Value::Bool(!LooseEquals(l, r));
  const bool membership = op == "in" || op == "not in";
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && membership) return Value::Bool(op == "not in");
    throw Error(fmt::format("cannot apply '{}' to an undefined value", op));
  }
  if (l.is_none() || r.is_none()) throw Error(fmt::format("cannot apply '{}' to none", op));
  if (op == "~") return Value::String(l.ConcatString() + r.ConcatString());
  if (op == "**" && NumberLike(l) && NumberLike(r)) return Power(l, r);
  if (l.is_number() && r.is_number()) {
    Value v = Arithmetic(op, l, r);
    if (!v.is_undefined()) return v;
  } else if (l.is_array() && r.is_array() && op == "+") {
    Value::Array both = l.array();
    both.insert(both.end(), r.array().begin(), r.array().end());
    return Value::MakeArray(std::move(both));
  }
  if (membership) {
    if (const auto found = Contains(l, r)) return Value::Bool(*found == (op == "in"));
  }
  if (op == "+" && (l.is_string() || r.is_string()))
    return Value::String(l.ConcatString() + r.ConcatString());
  if (l.is_string() && r.is_string() && (op == "<" || op == ">" || op == "<=" || op == ">=")) {
    const std::u16string a = ToUtf16(l.str()), b = ToUtf16(r.str());
    return Value::Bool(op == "<" ? a < b : op == ">" ? a > b : op == "<=" ? a <= b : a >= b);
  }
  throw Error(fmt::format("cannot apply '{}' to {} and {}", op, l.TypeName(), r.TypeName()));
}

Value Interpreter::EvalMember(const Expr& e, Scope& scope) {
  const Value object = Eval(*e.a, scope);
  if (e.computed && e.b->kind == Expr::Kind::kSlice) {
    const auto part = [&](const ExprPtr& p) { return p ? Eval(*p, scope) : Value(); };
    return Slice(object, part(e.b->a), part(e.b->b), part(e.b->c));
  }
  const Value key = e.computed                             ? Eval(*e.b, scope)
                    : e.b->kind == Expr::Kind::kIdentifier ? Value::String(e.b->name)
                                                           : e.b->literal;
  if ((object.is_array() || object.is_string()) && key.kind() == Value::Kind::kInt) {
    if (object.is_string()) return StringIndex(object.str(), key.number());
    const double n = static_cast<double>(object.array().size());
    const double at = key.number() < 0 ? n + key.number() : key.number();
    return at >= 0 && at < n ? object.array()[static_cast<size_t>(at)] : Value();
  }
  if (!key.is_string())
    throw Error(fmt::format("cannot index {} with {}", object.TypeName(), key.TypeName()));
  if (const Value* v = object.Find(key.str())) return *v;
  return BuiltinMember(object, key.str());
}

Value Interpreter::EvalCall(const Expr& e, Scope& scope) {
  Args args = EvalArgs(e.items, scope);
  const Value fn = Eval(*e.a, scope);
  if (!fn.is_function())
    throw Error(fmt::format("{} is not callable (it is {})", Describe(*e.a), fn.TypeName()));
  CallContext ctx{this, &scope};
  return fn.function()(args, ctx);
}

Args Interpreter::EvalArgs(const std::vector<ExprPtr>& items, Scope& scope) {
  Args args;
  for (const ExprPtr& item : items) {
    if (item->kind == Expr::Kind::kKeyword) {
      for (const auto& [k, v] : args.keyword)
        if (k == item->name) throw Error(fmt::format("keyword argument '{}' given twice", k));
      args.keyword.emplace_back(item->name, Eval(*item->a, scope));
    } else {
      args.positional.push_back(Eval(*item, scope));
    }
  }
  return args;
}

Value Interpreter::EvalInner(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kIdentifier:
      return scope.Lookup(e.name);
    case Expr::Kind::kArray:
    case Expr::Kind::kTuple: {
      Value::Array items;
      for (const ExprPtr& item : e.items) items.push_back(Eval(*item, scope));
      return Value::MakeArray(std::move(items));
    }
    case Expr::Kind::kObject: {
      Value::Entries entries;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        const Value key = Eval(*e.items[i], scope);
        if (!key.is_string()) throw Error("mapping keys must be strings");
        const Value v = Eval(*e.items[i + 1], scope);
        auto it = std::find_if(entries.begin(), entries.end(),
                               [&](const auto& kv) { return kv.first == key.str(); });
        if (it != entries.end())
          it->second = v;
        else
          entries.emplace_back(key.str(), v);
      }
      return Value::MakeObject(std::move(entries));
    }
    case Expr::Kind::kMember:
      return EvalMember(e, scope);
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kUnary: {
      const Value v = Eval(*e.a, scope);
      if (e.name == "not") return Value::Bool(!v.Truthy());
      if (!v.is_number() && v.kind() != Value::Kind::kBool)
        throw Error(fmt::format("unary '{}' needs a number, not {}", e.name, v.TypeName()));
      const double x = (e.name == "-" ? -1 : 1) * (v.is_number() ? v.number() : v.boolean());
      return v.kind() == Value::Kind::kFloat ? Value::Float(x) : Value::Int(x);
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, scope);
    case Expr::Kind::kFilter:
      return ApplyFilter(e.name, Eval(*e.a, scope), EvalArgs(e.items, scope));
    case Expr::Kind::kTest: {
      const bool r = ApplyTest(e.name, Eval(*e.a, scope), EvalArgs(e.items, scope));
      return Value::Bool(e.negate ? !r : r);
    }
    case Expr::Kind::kSelect:
      return Eval(*e.b, scope).Truthy() ? Eval(*e.a, scope) : Value();
    case Expr::Kind::kTernary:
      return Eval(*e.b, scope).Truthy() ? Eval(*e.a, scope) : Eval(*e.c, scope);
    case Expr::Kind::kSlice:
    case Expr::Kind::kKeyword:
      break;
  }
  throw Error("this expression cannot stand here");
}

}  // namespace lockstep::jinja

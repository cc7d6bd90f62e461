// The Jinja evaluator: statements write to an output string, expressions yield Values. Scoping
// follows the reference engine: `for` bodies and macro calls get a child scope, `if` does not,
// and a macro body sees the scope it is called from.
#include <cmath>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/interpreter.h"

namespace lockstep::jinja {

namespace {

constexpr int kMaxCallDepth = 256;  // recursive macros stop here instead of overflowing the stack

bool Mentions(const std::vector<Stmt>& body, std::string_view name);

bool Mentions(const Expr* e, std::string_view name) {
  if (e == nullptr) return false;
  if (e->kind == Expr::Kind::kIdentifier && e->name == name) return true;
  for (const ExprPtr& item : e->items)
    if (Mentions(item.get(), name)) return true;
  return Mentions(e->a.get(), name) || Mentions(e->b.get(), name) || Mentions(e->c.get(), name);
}

// Whether a macro body reads `varargs` / `kwargs`; only then may a call pass extra arguments.
bool Mentions(const std::vector<Stmt>& body, std::string_view name) {
  for (const Stmt& s : body) {
    if (Mentions(s.expr.get(), name) || Mentions(s.target.get(), name)) return true;
    for (const ExprPtr& p : s.params)
      if (Mentions(p.get(), name)) return true;
    if (Mentions(s.body, name) || Mentions(s.alternate, name)) return true;
  }
  return false;
}

}  // namespace

Flow Interpreter::ExecInner(const Stmt& s, Scope& scope, std::string& out) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      out += s.text;
      break;
    case Stmt::Kind::kComment:
      break;
    case Stmt::Kind::kOutput: {
      const Value v = Eval(*s.expr, scope);
      if (!v.is_none() && !v.is_undefined()) out += v.ToString();
      break;
    }
    case Stmt::Kind::kIf:
      return Exec(Eval(*s.expr, scope).Truthy() ? s.body : s.alternate, scope, out);
    case Stmt::Kind::kFor:
      return ExecFor(s, scope, out);
    case Stmt::Kind::kSet:
      ExecSet(s, scope);
      break;
    case Stmt::Kind::kMacro: {
      const Stmt* macro = &s;
      scope.Set(s.text, Value::MakeFunction(s.text, [macro](const Args& a, CallContext& ctx) {
                  return Value::String(ctx.interp->CallMacro(*macro, a, *ctx.scope));
                }));
      break;
    }
    case Stmt::Kind::kCallBlock:
      out += ExecCallBlock(s, scope);
      break;
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      if (Exec(s.body, scope, body) != Flow::kNormal)
        throw Error("'break' or 'continue' inside a filter block");
      out +=
          ApplyFilter(s.expr->name, Value::String(body), EvalArgs(s.expr->items, scope)).ToString();
      break;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::Bind(const Expr& target, const Value& v, Scope& scope) {
  if (target.kind == Expr::Kind::kIdentifier) return scope.Set(target.name, v);
  if (target.kind != Expr::Kind::kTuple) throw Error("cannot assign to this expression");
  if (!v.is_array()) throw Error(fmt::format("cannot unpack {}", v.TypeName()));
  if (v.array().size() != target.items.size())
    throw Error(fmt::format("cannot unpack {} values into {} names", v.array().size(),
                            target.items.size()));
  for (size_t i = 0; i < target.items.size(); ++i) {
    if (target.items[i]->kind != Expr::Kind::kIdentifier) throw Error("can only unpack into names");
    scope.Set(target.items[i]->name, v.array()[i]);
  }
}

Flow Interpreter::ExecFor(const Stmt& s, Scope& outer, std::string& out) {
  Scope scope{&outer, {}};
  const Expr* iterable = s.expr.get();
  const Expr* condition = nullptr;
  if (iterable->kind == Expr::Kind::kSelect)
    condition = iterable->b.get(), iterable = iterable->a.get();
  Value seq = Eval(*iterable, scope);
  if (seq.is_object()) {
    Value::Array keys;
    for (const auto& e : seq.entries()) keys.push_back(Value::String(e.first));
    seq = Value::MakeArray(std::move(keys));
  }
  if (!seq.is_array()) throw Error(fmt::format("cannot loop over {}", seq.TypeName()));
  Value::Array items;
  for (const Value& item : seq.array()) {
    if (condition != nullptr) {
      Scope test{&scope, {}};
      Bind(*s.target, item, test);
      if (!Eval(*condition, test).Truthy()) continue;
    }
    items.push_back(item);
  }
  bool ran = false;
  const double n = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const double k = static_cast<double>(i);
    scope.Set("loop",
              Value::MakeObject({{"index", Value::Int(k + 1)},
                                 {"index0", Value::Int(k)},
                                 {"revindex", Value::Int(n - k)},
                                 {"revindex0", Value::Int(n - k - 1)},
                                 {"first", Value::Bool(i == 0)},
                                 {"last", Value::Bool(i + 1 == items.size())},
                                 {"length", Value::Int(n)},
                                 {"previtem", i > 0 ? items[i - 1] : Value()},
                                 {"nextitem", i + 1 < items.size() ? items[i + 1] : Value()}}));
    Bind(*s.target, items[i], scope);
    // An iteration left by break or continue prints nothing, as in the reference engine.
    std::string body;
    const Flow f = Exec(s.body, scope, body);
    if (f == Flow::kContinue) continue;
    if (f == Flow::kBreak) break;
    out += body;
    ran = true;
  }
  return ran ? Flow::kNormal : Exec(s.alternate, scope, out);
}

void Interpreter::ExecSet(const Stmt& s, Scope& scope) {
  Value rhs;
  if (s.expr) {
    rhs = Eval(*s.expr, scope);
  } else {
    std::string body;
    if (Exec(s.body, scope, body) != Flow::kNormal)
      throw Error("'break' or 'continue' inside a set block");
    rhs = Value::String(std::move(body));
  }
  const Expr& t = *s.target;
  if (t.kind != Expr::Kind::kMember) return Bind(t, rhs, scope);
  const Value object = Eval(*t.a, scope);
  if (!object.is_namespace())
    throw Error(
        fmt::format("cannot set an attribute of {} (only of a namespace())", object.TypeName()));
  if (t.b->kind != Expr::Kind::kIdentifier) throw Error("cannot set this attribute of a namespace");
  object.SetEntry(t.b->name, std::move(rhs));
}

std::string Interpreter::CallMacro(const Stmt& macro, const Args& args, Scope& caller) {
  if (depth_ >= kMaxCallDepth)
    throw Error(fmt::format("macro '{}' nests deeper than {} calls", macro.text, kMaxCallDepth));
  ++depth_;
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  Scope scope{&caller, {}};
  auto keyword = args.keyword;
  std::vector<std::pair<std::string, const Expr*>> pending_defaults;
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Expr& p = *macro.params[i];
    Value v;
    bool given = i < args.positional.size();
    if (given) v = args.positional[i];
    for (auto it = keyword.begin(); !given && it != keyword.end(); ++it)
      if (it->first == p.name) v = it->second, given = true, keyword.erase(it);
    if (!given && p.kind == Expr::Kind::kKeyword) pending_defaults.emplace_back(p.name, p.a.get());
    scope.Set(p.name, v);
  }
  if (args.positional.size() > macro.params.size() && !Mentions(macro.body, "varargs"))
    throw Error(fmt::format("macro '{}' takes at most {} arguments, {} given", macro.text,
                            macro.params.size(), args.positional.size()));
  if (!keyword.empty() && !Mentions(macro.body, "kwargs"))
    throw Error(fmt::format("macro '{}' has no parameter '{}'", macro.text, keyword[0].first));
  Value::Array extra;
  for (size_t i = macro.params.size(); i < args.positional.size(); ++i)
    extra.push_back(args.positional[i]);
  scope.Set("varargs", Value::MakeArray(std::move(extra)));
  scope.Set("kwargs", Value::MakeObject(std::move(keyword)));
  for (const auto& [name, dflt] : pending_defaults) scope.Set(name, Eval(*dflt, scope));
  std::string out;
  if (Exec(macro.body, scope, out) != Flow::kNormal)
    throw Error(fmt::format("'break' or 'continue' outside a loop in macro '{}'", macro.text));
  return out;
}

std::string Interpreter::ExecCallBlock(const Stmt& s, Scope& scope) {
  // caller() renders the block in the scope of the call statement, and only while it runs.
  auto alive = std::make_shared<bool>(true);
  const Stmt* block = &s;
  Scope* home = &scope;
  const Value caller =
      Value::MakeFunction("caller", [block, home, alive](const Args& a, CallContext& ctx) {
        if (!*alive) throw Error("caller() used after its call block ended");
        Scope inner{home, {}};
        for (size_t i = 0; i < block->params.size(); ++i)
          inner.Set(block->params[i]->name, i < a.positional.size() ? a.positional[i] : Value());
        std::string out;
        if (ctx.interp->Exec(block->body, inner, out) != Flow::kNormal)
          throw Error("'break' or 'continue' outside a loop in a call block");
        return Value::String(out);
      });
  Scope with_caller{&scope, {{"caller", caller}}};
  const Expr& call = *s.expr;
  const Value fn = Eval(*call.a, scope);
  if (!fn.is_function()) throw Error(fmt::format("'{}' is not a macro", call.a->name));
  CallContext ctx{this, &with_caller};
  const Value result = fn.function()(EvalArgs(call.items, scope), ctx);
  *alive = false;
  return result.ToString();
}

}  // namespace lockstep::jinja

// The Jinja evaluator's internals, shared by its statement and expression halves.
#pragma once

#include <string>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace lockstep::jinja {

struct Scope {
  Scope* parent = nullptr;
  Value::Entries vars;

  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
  Value Lookup(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent)
      for (const auto& [k, v] : s->vars)
        if (k == name) return v;
    return Value();
  }
};

class Interpreter;
struct CallContext {
  Interpreter* interp;
  Scope* scope;
};

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  Flow Exec(const std::vector<Stmt>& body, Scope& scope, std::string& out) {
    for (const Stmt& s : body) {
      const Flow f = ExecOne(s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Value Eval(const Expr& e, Scope& scope) {
    try {
      return EvalInner(e, scope);
    } catch (Error& err) {
      if (err.line() == 0) err.set_line(e.line);
      throw;
    }
  }

  std::string CallMacro(const Stmt& macro, const Args& args, Scope& caller);

 private:
  Flow ExecOne(const Stmt& s, Scope& scope, std::string& out) {
    try {
      return ExecInner(s, scope, out);
    } catch (Error& err) {
      if (err.line() == 0) err.set_line(s.line);
      throw;
    }
  }
  Flow ExecInner(const Stmt& s, Scope& scope, std::string& out);
  Flow ExecFor(const Stmt& s, Scope& outer, std::string& out);
  void ExecSet(const Stmt& s, Scope& scope);
  std::string ExecCallBlock(const Stmt& s, Scope& scope);
  void Bind(const Expr& target, const Value& v, Scope& scope);
  Value EvalInner(const Expr& e, Scope& scope);
  Value EvalBinary(const Expr& e, Scope& scope);
  Value EvalMember(const Expr& e, Scope& scope);
  Value EvalCall(const Expr& e, Scope& scope);
  Args EvalArgs(const std::vector<ExprPtr>& items, Scope& scope);

  int depth_ = 0;
};

}  // namespace lockstep::jinja

// The Jinja syntax tree: expressions and statements, each with the template line it starts on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "template/value.h"

namespace lockstep::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,     // literal
    kIdentifier,  // name
    kArray,       // items
    kTuple,       // items
    kObject,      // items: key, value, key, value...
    kMember,      // a[b] (computed) or a.name
    kSlice,       // a:b:c inside [], any of them may be null
    kCall,        // a(items)
    kKeyword,     // name=a, inside argument lists
    kUnary,       // name a  (not, -, +)
    kBinary,      // a name b
    kFilter,      // a | name(items)
    kTest,        // a is [not] name(items)
    kSelect,      // a if b  (undefined when b is false)
    kTernary,     // a if b else c
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> items;
  ExprPtr a, b, c;
  bool computed = false;
  bool negate = false;
};

struct Stmt {
  enum class Kind {
    kText,
    kOutput,
    kComment,
    kIf,
    kFor,
    kSet,
    kMacro,
    kCallBlock,
    kFilterBlock,
    kBreak,
    kContinue
  };
  Kind kind;
  int line = 0;
  std::string text;             // kText; kMacro: the macro's name
  ExprPtr expr;                 // output, if test, for iterable, set value, filter, call
  ExprPtr target;               // set target, for loop variable(s)
  std::vector<ExprPtr> params;  // macro / caller parameters (identifiers or name=default)
  std::vector<Stmt> body;
  std::vector<Stmt> alternate;  // else / elif branch, for-else
};

// Parses tokens into statements. Throws Error naming the line of an unknown or malformed
// construct (unknown statements, filters and tests are refused here, before any rendering).
std::vector<Stmt> Parse(std::string_view source);

// Names the interpreter implements (checked at parse time).
bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

}  // namespace lockstep::jinja

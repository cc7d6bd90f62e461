// The interpreter's filters, tests, member functions of strings and mappings, and globals.
#pragma once

#include <string_view>

#include "template/value.h"

namespace lockstep::jinja {

// `operand | name(args)`. Throws Error when the filter does not apply to the operand's type.
Value ApplyFilter(std::string_view name, const Value& operand, const Args& args);

// `operand is name(args)`.
bool ApplyTest(std::string_view name, const Value& operand, const Args& args);

// `object.name` where the object has no entry of that name: string methods (`split`,
// `startswith`, ...), mapping methods (`get`, `items`, ...), `length`; undefined otherwise.
Value BuiltinMember(const Value& object, std::string_view name);

// Calls the string or mapping method `name` on `object`; false when there is none.
bool CallMethod(const Value& object, std::string_view name, const Args& args, Value* out);

// The names every template sees: true/false/none (and Python's spellings), namespace(),
// range(), raise_exception(), strftime_now().
Value::Entries Globals();

// Python's slice semantics as the reference engine implements them, over arrays or code points.
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace lockstep::jinja

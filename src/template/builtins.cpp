// Filters and tests, with the reference engine's rules for which operand types each accepts.
#include "template/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "template/sort.h"

namespace lockstep::jinja {
namespace {

constexpr std::string_view kFilters[] = {
    "abs",        "bool",   "capitalize", "count",      "d",       "default", "dictsort", "first",
    "float",      "indent", "int",        "items",      "join",    "last",    "length",   "list",
    "lower",      "map",    "reject",     "rejectattr", "replace", "reverse", "safe",     "select",
    "selectattr", "sort",   "string",     "title",      "tojson",  "trim",    "unique",   "upper"};

constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined",  "divisibleby", "eq",      "equalto",   "even", "false",
    "in",      "integer",  "iterable", "lower",       "mapping", "ne",        "none", "number",
    "odd",     "sameas",   "sequence", "string",      "true",    "undefined", "upper"};

Value Arg(const Args& a, size_t i, std::string_view keyword, const Value& fallback) {
  if (i < a.positional.size()) return a.positional[i];
  if (const Value* k = a.Keyword(keyword)) return *k;
  return fallback;
}

bool BoolArg(const Args& a, size_t i, std::string_view keyword) {
  const Value& v = Arg(a, i, keyword, Value::Bool(false));
  if (v.kind() != Value::Kind::kBool) throw Error(fmt::format("'{}' must be a boolean", keyword));
  return v.boolean();
}

[[noreturn]] void NotFor(std::string_view filter, const Value& operand) {
  throw Error(fmt::format("filter '{}' cannot apply to {}", filter, operand.TypeName()));
}

// JavaScript's Array.prototype.join of the raw values: none and undefined print nothing.
std::string JoinPart(const Value& v) {
  return v.is_none() || v.is_undefined() ? std::string() : v.ConcatString();
}

// `item.a.b.0`: entries of mappings, indices of arrays; undefined when a step is missing.
Value AttributePath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    if (v.has_entries()) {
      const Value* e = v.Find(part);
      v = e ? *e : Value();
    } else if (v.is_array()) {
      char* end = nullptr;
      const long i = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || i < 0 || i >= static_cast<long>(v.array().size())) return Value();
      v = v.array()[static_cast<size_t>(i)];
    } else {
      return Value();
    }
    start = dot + 1;
  }
  return v;
}

Value ToJsonFilter(const Value& operand, const Args& a) {
  JsonStyle style;
  const Value& indent = Arg(a, 0, "indent", Value::None());
  if (!indent.is_none() && indent.kind() != Value::Kind::kInt)
    throw Error("tojson indent must be an integer");
  if (!indent.is_none()) style.indent = static_cast<int>(indent.number());
  style.ensure_ascii = BoolArg(a, 99, "ensure_ascii");
  style.sort_keys = BoolArg(a, 99, "sort_keys");
  if (const Value* sep = a.Keyword("separators"); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->array().size() != 2 || !sep->array()[0].is_string() ||
        !sep->array()[1].is_string())
      throw Error("tojson separators must be two strings");
    style.item_sep = sep->array()[0].str(), style.key_sep = sep->array()[1].str();
  }
  return Value::String(ToJson(operand, style));
}

Value NumberFilter(std::string_view name, const Value& operand, const Args& a) {
  const bool to_int = name == "int";
  if (operand.is_string()) {
    const char* s = operand.str().c_str();
    char* end = nullptr;
    const double d = to_int ? static_cast<double>(std::strtoll(s, &end, 10)) : std::strtod(s, &end);
    if (end == s) return Arg(a, 0, "default", to_int ? Value::Int(0) : Value::Float(0));
    return to_int ? Value::Int(d) : Value::Float(d);
  }
  if (operand.is_number())
    return to_int ? Value::Int(std::floor(operand.number())) : Value::Float(operand.number());
  if (operand.kind() == Value::Kind::kBool)
    return to_int ? Value::Int(operand.boolean()) : Value::Float(operand.boolean());
  NotFor(name, operand);
}

Value Indent(const std::string& s, const Args& a) {
  const Value& width = Arg(a, 0, "width", Value::Int(4));
  if (width.kind() != Value::Kind::kInt) throw Error("indent width must be an integer");
  const bool first = Arg(a, 1, "first", Value::Bool(false)).Truthy();
  const bool blank = Arg(a, 2, "blank", Value::Bool(false)).Truthy();
  const std::string pad(static_cast<size_t>(std::max(0.0, width.number())), ' ');
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = std::min(s.find('\n', start), s.size());
    const std::string part = s.substr(start, nl - start);
    out += ((!first && line == 0) || (!blank && part.empty()) ? "" : pad) + part;
    if (nl == s.size()) break;
    out += '\n';
    start = nl + 1;
  }
  return Value::String(out);
}

Value StringFilter(std::string_view name, const Value& operand, const Args& a) {
  const std::string& s = operand.str();
  if (name == "trim") return Value::String(JsTrim(s, true, true));
  if (name == "length" || name == "count") return Value::Int(static_cast<double>(Utf16Length(s)));
  if (name == "string") return operand;
  if (name == "indent") return Indent(s, a);
  if (name == "join") {
    const Value& sep = Arg(a, 0, "separator", Value::String(""));
    std::string out;
    const auto cps = CodePoints(s);
    for (size_t i = 0; i < cps.size(); ++i) out += (i ? sep.ConcatString() : "") + cps[i];
    return Value::String(out);
  }
  if (name != "upper" && name != "lower" && name != "title" && name != "capitalize" &&
      name != "replace")
    NotFor(name, operand);
  Value out;
  CallMethod(operand, name, a, &out);
  return out;
}

// select / reject (Python Jinja) and selectattr / rejectattr.
Value SelectFilter(std::string_view name, const Value& operand, const Args& a) {
  const bool by_attr = name.ends_with("attr"), keep = name.starts_with("select");
  const size_t test_at = by_attr ? 1 : 0;
  if (by_attr && (a.positional.empty() || !a.positional[0].is_string()))
    throw Error(fmt::format("{}() takes an attribute name", name));
  Args test_args;
  for (size_t i = test_at + 1; i < a.positional.size(); ++i)
    test_args.positional.push_back(a.positional[i]);
  const Value* test = test_at < a.positional.size() ? &a.positional[test_at] : nullptr;
  if (test && !test->is_string()) throw Error(fmt::format("{}() takes a test name", name));
  Value::Array out;
  for (const Value& item : operand.array()) {
    if (by_attr && !item.has_entries())
      throw Error(fmt::format("{}() applies to a list of mappings", name));
    const Value* subject = by_attr ? item.Find(a.positional[0].str()) : &item;
    bool pass = false;
    if (subject != nullptr)
      pass = test ? ApplyTest(test->str(), *subject, test_args) : subject->Truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeArray(std::move(out));
}

Value SortFilter(const Value& operand, const Args& a) {
  const bool reverse = BoolArg(a, 0, "reverse");
  const bool case_sensitive = BoolArg(a, 1, "case_sensitive");
  const Value& attr = Arg(a, 2, "attribute", Value::None());
  Value::Array items = operand.array();
  const auto key = [&](const Value& v) {
    return attr.is_none() ? v : AttributePath(v, attr.is_string() ? attr.str() : attr.ToString());
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = Compare(key(x), key(y), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::MakeArray(std::move(items));
}

Value ArrayFilter(std::string_view name, const Value& operand, const Args& a) {
  const Value::Array& items = operand.array();
  if (name == "list") return operand;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length" || name == "count") return Value::Int(static_cast<double>(items.size()));
  if (name == "reverse") return Value::MakeArray(Value::Array(items.rbegin(), items.rend()));
  if (name == "sort") return SortFilter(operand, a);
  if (name == "string") return Value::String(operand.ToString());
  if (name == "join") {
    const Value& sep = Arg(a, 0, "separator", Value::String(""));
    if (!sep.is_string()) throw Error("join separator must be a string");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? sep.str() : "") + JoinPart(items[i]);
    return Value::String(out);
  }
  if (name == "unique") {
    Value::Array out;
    for (const Value& v : items)
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return StrictEquals(o, v); }))
        out.push_back(v);
    return Value::MakeArray(std::move(out));
  }
  if (name == "map") {
    const Value* attr = a.Keyword("attribute");
    if (attr == nullptr || !attr->is_string()) throw Error("map() needs attribute='name'");
    const Value* dflt = a.Keyword("default");
    Value::Array out;
    for (const Value& v : items) {
      if (!v.has_entries()) throw Error("map(attribute=...) applies to a list of mappings");
      Value got = AttributePath(v, attr->str());
      out.push_back(got.is_undefined() && dflt ? *dflt : got);
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return SelectFilter(name, operand, a);
  NotFor(name, operand);
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

bool IsKnownTest(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Value ApplyFilter(std::string_view name, const Value& operand, const Args& a) {
  if (name == "safe") return operand;
  if (name == "tojson") return ToJsonFilter(operand, a);
  if (name == "default" || name == "d") {
    const bool boolean = BoolArg(a, 1, "boolean");
    if (operand.is_undefined() || (boolean && !operand.Truthy()))
      return Arg(a, 0, "default_value", Value::String(""));
    return operand;
  }
  if (name == "int" || name == "float") return NumberFilter(name, operand, a);
  if (operand.is_array()) return ArrayFilter(name, operand, a);
  if (operand.is_string()) return StringFilter(name, operand, a);
  if (operand.is_number()) {
    if (name == "abs")
      return operand.kind() == Value::Kind::kInt ? Value::Int(std::fabs(operand.number()))
                                                 : Value::Float(std::fabs(operand.number()));
    if (name == "string") return Value::String(operand.ToString());
    NotFor(name, operand);
  }
  if (operand.is_object()) {
    if (name == "items") {
      Value out;
      CallMethod(operand, "items", a, &out);
      return out;
    }
    if (name == "length" || name == "count")
      return Value::Int(static_cast<double>(operand.entries().size()));
    if (name == "dictsort") return DictSort(operand, a);
    NotFor(name, operand);
  }
  if (operand.kind() == Value::Kind::kBool) {
    if (name == "bool") return operand;
    if (name == "string") return Value::String(operand.ToString());
  }
  NotFor(name, operand);
}

bool ApplyTest(std::string_view name, const Value& v, const Args& a) {
  using K = Value::Kind;
  const auto arg = [&]() -> const Value& {
    if (a.positional.empty()) throw Error(fmt::format("test '{}' takes an argument", name));
    return a.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.boolean();
  if (name == "false") return v.kind() == K::kBool && !v.boolean();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && AsciiLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && AsciiUpper(v.str()) == v.str();
  if (name == "odd" || name == "even") {
    if (v.kind() != K::kInt) throw Error(fmt::format("test '{}' needs an integer", name));
    return (std::fmod(std::fabs(v.number()), 2) == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (!v.is_number() || !arg().is_number()) throw Error("test 'divisibleby' needs numbers");
    return std::fmod(v.number(), arg().number()) == 0;
  }
  if (name == "equalto" || name == "eq" || name == "sameas") return StrictEquals(v, arg());
  if (name == "ne") return !StrictEquals(v, arg());
  if (name == "in") {
    const Value& c = arg();
    if (c.is_array())
      return std::any_of(c.array().begin(), c.array().end(),
                         [&](const Value& e) { return StrictEquals(e, v); });
    if (c.is_string() && v.is_string()) return c.str().find(v.str()) != std::string::npos;
    if (c.is_object() && v.is_string()) return c.Find(v.str()) != nullptr;
    throw Error(fmt::format("test 'in' cannot look in {}", c.TypeName()));
  }
  throw Error(fmt::format("unknown test '{}'", name));
}

int Compare(const Value& a, const Value& b, bool case_sensitive) {
  const auto nullish = [](const Value& v) { return v.is_none() || v.is_undefined(); };
  if (nullish(a) || nullish(b)) {
    if (a.kind() == b.kind()) return 0;
    throw Error(fmt::format("cannot compare {} with {}", a.TypeName(), b.TypeName()));
  }
  const auto numeric = [](const Value& v) {
    return v.is_number() || v.kind() == Value::Kind::kBool;
  };
  if (numeric(a) && numeric(b)) {
    const double x = a.is_number() ? a.number() : a.boolean(),
                 y = b.is_number() ? b.number() : b.boolean();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (!a.is_string() || !b.is_string())
    throw Error(fmt::format("cannot compare {} with {}", a.TypeName(), b.TypeName()));
  const std::u16string x = ToUtf16(case_sensitive ? a.str() : AsciiLower(a.str()));
  const std::u16string y = ToUtf16(case_sensitive ? b.str() : AsciiLower(b.str()));
  return x < y ? -1 : x > y ? 1 : 0;
}

Value DictSort(const Value& object, const Args& a) {
  const bool case_sensitive = BoolArg(a, 0, "case_sensitive");
  const Value& by = Arg(a, 1, "by", Value::String("key"));
  if (!by.is_string() || (by.str() != "key" && by.str() != "value"))
    throw Error("dictsort by must be 'key' or 'value'");
  const bool reverse = BoolArg(a, 2, "reverse");
  Value::Entries entries = object.entries();
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    const int c = by.str() == "key"
                      ? Compare(Value::String(x.first), Value::String(y.first), case_sensitive)
                      : Compare(x.second, y.second, case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  Value::Array pairs;
  for (auto& [k, v] : entries) pairs.push_back(Value::MakeArray({Value::String(k), v}));
  return Value::MakeArray(std::move(pairs));
}

}  // namespace lockstep::jinja

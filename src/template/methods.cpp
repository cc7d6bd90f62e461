// Member functions of strings and mappings, slices, and the global functions of a template.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <span>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/sort.h"

namespace lockstep::jinja {
namespace {

Value Arg(const Args& a, size_t i, std::string_view keyword, const Value& fallback) {
  if (i < a.positional.size()) return a.positional[i];
  if (const Value* k = a.Keyword(keyword)) return *k;
  return fallback;
}

Value Method(std::string name, std::function<Value(const Args&)> fn) {
  return Value::MakeFunction(std::move(name),
                             [fn = std::move(fn)](const Args& a, CallContext&) { return fn(a); });
}

bool IsWordChar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Upper-cases the first word character after every non-word one (JavaScript's /\b\w/).
std::string Title(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (IsWordChar(c) && (i == 0 || !IsWordChar(static_cast<unsigned char>(s[i - 1]))) &&
        c >= 'a' && c <= 'z')
      s[i] = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

bool HasAffix(const std::string& s, const Value& pattern, bool prefix, std::string_view what) {
  const auto test = [&](const std::string& p) {
    return s.size() >= p.size() && (prefix ? s.compare(0, p.size(), p) == 0
                                           : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (pattern.is_string()) return test(pattern.str());
  if (!pattern.is_array())
    throw Error(fmt::format("{}() takes a string or a tuple of strings", what));
  for (const Value& p : pattern.array()) {
    if (!p.is_string()) throw Error(fmt::format("{}() tuple elements must be strings", what));
    if (test(p.str())) return true;
  }
  return false;
}

Value Split(const std::string& s, const Args& a) {
  const Value& sep = Arg(a, 0, "sep", Value::None());
  const Value& maxv = Arg(a, 1, "maxsplit", Value::Int(-1));
  if (!sep.is_string() && !sep.is_none()) throw Error("split() separator must be a string or none");
  if (maxv.kind() != Value::Kind::kInt) throw Error("split() maxsplit must be an integer");
  const auto max = static_cast<long>(maxv.number());
  Value::Array parts;
  if (sep.is_none()) {  // runs of whitespace, Python's str.split()
    const std::string t = JsTrim(s, true, false);
    size_t i = 0, len = 0;
    while (i < t.size()) {
      if (max != -1 && static_cast<long>(parts.size()) >= max) {
        parts.push_back(Value::String(t.substr(i)));
        break;
      }
      size_t j = i;
      while (j < t.size() && !IsJsSpaceAt(t, j, &len)) ++j;
      parts.push_back(Value::String(t.substr(i, j - i)));
      while (j < t.size() && IsJsSpaceAt(t, j, &len)) j += len;
      i = j;
    }
    return Value::MakeArray(std::move(parts));
  }
  const std::string& d = sep.str();
  if (d.empty()) throw Error("split() separator is empty");
  size_t start = 0;
  while (true) {
    const size_t at = s.find(d, start);
    const bool limit = max != -1 && static_cast<long>(parts.size()) >= max;
    if (at == std::string::npos || limit) {
      parts.push_back(Value::String(s.substr(start)));
      break;
    }
    parts.push_back(Value::String(s.substr(start, at - start)));
    start = at + d.size();
  }
  return Value::MakeArray(std::move(parts));
}

std::string Replace(const std::string& s, const Args& a) {
  if (a.positional.size() < 2) throw Error("replace() takes the old and the new string");
  const Value& from = a.positional[0];
  const Value& to = a.positional[1];
  if (!from.is_string() || !to.is_string()) throw Error("replace() arguments must be strings");
  const Value& count_v = Arg(a, 2, "count", Value::None());
  if (count_v.kind() != Value::Kind::kInt && !count_v.is_none())
    throw Error("replace() count must be an integer or none");
  double left = count_v.is_none() || count_v.number() < 0 ? INFINITY : count_v.number();
  std::string out;
  if (from.str().empty()) {  // an empty pattern matches before every code point and at the end
    for (const std::string& cp : CodePoints(s)) {
      if (left > 0) out += to.str(), --left;
      out += cp;
    }
    if (left > 0) out += to.str();
    return out;
  }
  size_t start = 0;
  for (size_t at; left > 0 && (at = s.find(from.str(), start)) != std::string::npos; --left) {
    out += s.substr(start, at - start) + to.str();
    start = at + from.str().size();
  }
  return out + s.substr(start);
}

constexpr std::string_view kStringMethods[] = {"upper",    "lower", "strip",      "lstrip",
                                               "rstrip",   "title", "capitalize", "startswith",
                                               "endswith", "split", "replace"};
constexpr std::string_view kObjectMethods[] = {"get", "items", "keys", "values", "dictsort"};

bool Contains(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Value StringMethod(const std::string& s, std::string_view n, const Args& a) {
  if (n == "upper") return Value::String(AsciiUpper(s));
  if (n == "lower") return Value::String(AsciiLower(s));
  if (n == "strip") return Value::String(JsTrim(s, true, true));
  if (n == "lstrip") return Value::String(JsTrim(s, true, false));
  if (n == "rstrip") return Value::String(JsTrim(s, false, true));
  if (n == "title") return Value::String(Title(s));
  if (n == "capitalize")
    return Value::String(s.empty() ? s : AsciiUpper(s.substr(0, 1)) + s.substr(1));
  if (n == "startswith" || n == "endswith") {
    if (a.positional.empty()) throw Error(fmt::format("{}() takes an argument", n));
    return Value::Bool(HasAffix(s, a.positional[0], n == "startswith", n));
  }
  if (n == "split") return Split(s, a);
  return Value::String(Replace(s, a));
}

Value Pairs(const Value& object) {
  Value::Array out;
  for (const auto& [k, v] : object.entries())
    out.push_back(Value::MakeArray({Value::String(k), v}));
  return Value::MakeArray(std::move(out));
}

Value ObjectMethod(const Value& o, std::string_view n, const Args& a) {
  if (n == "get") {
    if (a.positional.empty() || !a.positional[0].is_string())
      throw Error("get() takes a string key");
    if (const Value* v = o.Find(a.positional[0].str())) return *v;
    return a.positional.size() > 1 ? a.positional[1] : Value::None();
  }
  if (n == "items") return Pairs(o);
  if (n == "dictsort") return DictSort(o, a);
  Value::Array out;
  for (const auto& [k, v] : o.entries()) out.push_back(n == "keys" ? Value::String(k) : v);
  return Value::MakeArray(std::move(out));
}

Value Namespace(const Args& a) {
  Value::Entries entries;
  if (a.positional.size() > 1) throw Error("namespace() takes at most one positional argument");
  if (a.positional.size() == 1) {
    const Value& src = a.positional[0];
    if (src.is_object()) {
      entries = src.entries();
    } else if (src.is_array()) {
      for (const Value& pair : src.array()) {
        if (!pair.is_array() || pair.array().size() != 2 || !pair.array()[0].is_string())
          throw Error("namespace() takes [key, value] pairs with string keys");
        entries.emplace_back(pair.array()[0].str(), pair.array()[1]);
      }
    } else {
      throw Error(fmt::format("namespace() cannot take {}", src.TypeName()));
    }
  }
  const Value ns = Value::MakeNamespace(std::move(entries));
  for (const auto& [k, v] : a.keyword) ns.SetEntry(k, v);
  return ns;
}

Value Range(const Args& a) {
  for (const Value& v : a.positional)
    if (!v.is_number()) throw Error(fmt::format("range() takes numbers, not {}", v.TypeName()));
  if (a.positional.empty() || a.positional.size() > 3) throw Error("range() takes 1 to 3 numbers");
  double start = 0, stop = a.positional[0].number(), step = 1;
  if (a.positional.size() >= 2) start = a.positional[0].number(), stop = a.positional[1].number();
  if (a.positional.size() == 3) step = a.positional[2].number();
  if (step == 0) throw Error("range() step must not be zero");
  if (std::fabs((stop - start) / step) > 1e7) throw Error("range() is too long");
  Value::Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::Int(i));
  return Value::MakeArray(std::move(out));
}

std::string StrftimeNow(const std::string& format) {
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    const char f = i + 1 < format.size() && format[i] == '%' ? format[i + 1] : '\0';
    std::string part;
    if (f == 'Y')
      part = std::to_string(tm.tm_year + 1900);
    else if (f == 'm')
      part = fmt::format("{:02d}", tm.tm_mon + 1);
    else if (f == 'd')
      part = fmt::format("{:02d}", tm.tm_mday);
    else if (f == 'H')
      part = fmt::format("{:02d}", tm.tm_hour);
    else if (f == 'M')
      part = fmt::format("{:02d}", tm.tm_min);
    else if (f == 'B')
      part = kMonths[tm.tm_mon];
    else if (f == 'b')
      part = std::string(kMonths[tm.tm_mon]).substr(0, 3);
    else if (f == '%')
      part = "%";
    if (part.empty() && f != '%') {
      out += format[i];
      continue;
    }
    out += part;
    ++i;
  }
  return out;
}

}  // namespace

bool CallMethod(const Value& object, std::string_view name, const Args& args, Value* out) {
  if (object.is_string() && Contains(kStringMethods, name)) {
    *out = StringMethod(object.str(), name, args);
    return true;
  }
  if (object.is_object() && Contains(kObjectMethods, name)) {
    *out = ObjectMethod(object, name, args);
    return true;
  }
  return false;
}

Value BuiltinMember(const Value& object, std::string_view name) {
  if ((object.is_string() || object.is_array()) && name == "length")
    return Value::Int(static_cast<double>(object.is_string() ? Utf16Length(object.str())
                                                             : object.array().size()));
  const bool method = (object.is_string() && Contains(kStringMethods, name)) ||
                      (object.is_object() && Contains(kObjectMethods, name));
  if (!method) return Value();
  return Value::MakeFunction(std::string(name),
                             [object, n = std::string(name)](const Args& a, CallContext&) {
                               Value out;
                               CallMethod(object, n, a, &out);
                               return out;
                             });
}

Value::Entries Globals() {
  Value::Entries g = {{"true", Value::Bool(true)},   {"false", Value::Bool(false)},
                      {"none", Value::None()},       {"True", Value::Bool(true)},
                      {"False", Value::Bool(false)}, {"None", Value::None()}};
  g.emplace_back("namespace", Method("namespace", Namespace));
  g.emplace_back("range", Method("range", Range));
  g.emplace_back("raise_exception", Method("raise_exception", [](const Args& a) -> Value {
                   const std::string msg = a.positional.empty() ? "" : a.positional[0].ToString();
                   throw Error("the template raised an exception: " + msg);
                 }));
  g.emplace_back("strftime_now", Method("strftime_now", [](const Args& a) {
                   if (a.positional.empty() || !a.positional[0].is_string())
                     throw Error("strftime_now() takes a format string");
                   return Value::String(StrftimeNow(a.positional[0].str()));
                 }));
  return g;
}

Value Slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (!object.is_array() && !object.is_string())
    throw Error(fmt::format("cannot slice {}", object.TypeName()));
  for (const Value* v : {&start_v, &stop_v, &step_v})
    if (!v->is_undefined() && v->kind() != Value::Kind::kInt)
      throw Error("slice bounds must be integers");
  std::vector<std::string> cps;
  if (object.is_string()) cps = CodePoints(object.str());
  const long n = static_cast<long>(object.is_array() ? object.array().size() : cps.size());
  const long step = step_v.is_undefined() ? 1 : static_cast<long>(step_v.number());
  if (step == 0) throw Error("slice step must not be zero");
  // A bound below `wrap` counts from the end; the result is clamped to [lo, hi].
  const auto bound = [&](const Value& v, long dflt, long wrap, long lo, long hi) {
    const long x = v.is_undefined() ? dflt : static_cast<long>(v.number());
    return x < wrap ? std::max(n + x, lo) : std::min(x, hi);
  };
  const long start = step > 0 ? bound(start_v, 0, 0, 0, n) : bound(start_v, n - 1, 0, -1, n - 1);
  const long stop = step > 0 ? bound(stop_v, n, 0, 0, n) : bound(stop_v, -1, -1, -1, n - 1);
  Value::Array items;
  std::string text;
  for (long i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (object.is_array())
      items.push_back(object.array()[static_cast<size_t>(i)]);
    else
      text += cps[static_cast<size_t>(i)];
  }
  return object.is_array() ? Value::MakeArray(std::move(items)) : Value::String(std::move(text));
}

}  // namespace lockstep::jinja

// Jinja values: construction from JSON, printing, truthiness and equality as the reference
// engine (@huggingface/jinja, i.e. JavaScript) defines them.
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace lockstep::jinja {

const Value* Args::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(double d) {
  Value v;
  v.kind_ = Kind::kInt;
  v.num_ = d;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.num_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::move(s);
  return v;
}
Value Value::MakeArray(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.array_ = std::make_shared<const Array>(std::move(items));
  return v;
}
Value Value::MakeObject(Entries entries) {
  Value v;
  v.kind_ = Kind::kObject;
  v.entries_ = std::make_shared<Entries>(std::move(entries));
  return v;
}
Value Value::MakeNamespace(Entries entries) {
  Value v = MakeObject(std::move(entries));
  v.kind_ = Kind::kNamespace;
  return v;
}
Value Value::MakeFunction(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.str_ = std::move(name);
  v.fn_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(static_cast<double>(j.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Int(static_cast<double>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) && d == std::floor(d) ? Int(d) : Float(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(FromJson(e));
      return MakeArray(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Entries e;
      e.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) e.emplace_back(it.key(), FromJson(*it));
      return MakeObject(std::move(e));
    }
    default:
      return Value();  // binary and discarded values have no Jinja meaning
  }
}

const Value* Value::Find(std::string_view key) const {
  if (!has_entries()) return nullptr;
  for (const auto& [k, v] : *entries_)
    if (k == key) return &v;
  return nullptr;
}

void Value::SetEntry(const std::string& key, Value v) const {
  for (auto& [k, old] : *entries_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  entries_->emplace_back(key, std::move(v));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
    case Kind::kFloat:
      return num_ != 0 && !std::isnan(num_);
    case Kind::kString:
      return !str_.empty();
    case Kind::kArray:
      return !array_->empty();
    case Kind::kObject:
      return !entries_->empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string JsNumber(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // e.g. "-1.25e+02"
  std::string sign;
  if (sci.front() == '-') sign = "-", sci.remove_prefix(1);
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int k = static_cast<int>(digits.size()), n = exp10 + 1;
  if (k <= n && n <= 21) return sign + digits + std::string(static_cast<size_t>(n - k), '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  std::string mant = digits.substr(0, 1);
  if (k > 1) mant += "." + digits.substr(1);
  return sign + mant + "e" + (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "null";
    case Kind::kBool:
      return b_ ? "true" : "false";
    case Kind::kInt:
      return JsNumber(num_);
    case Kind::kFloat:
      if (num_ == 0 && std::signbit(num_)) return "-0.0";
      if (std::isfinite(num_) && num_ == std::floor(num_) && std::fabs(num_) < 1e21)
        return fmt::format("{:.1f}", num_);  // JavaScript's toFixed(1) of a whole number
      return JsNumber(num_);
    case Kind::kString:
      return str_;
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: {
      JsonStyle style;
      style.undefined_as_null = false;
      return ToJson(*this, style);
    }
    case Kind::kFunction:
      return "function " + str_;
  }
  return {};
}

std::string Value::ConcatString() const {
  switch (kind_) {
    case Kind::kInt:
    case Kind::kFloat:
      return JsNumber(num_);
    case Kind::kArray: {
      std::string s;
      for (size_t i = 0; i < array_->size(); ++i) s += (i ? "," : "") + (*array_)[i].ToString();
      return s;
    }
    case Kind::kObject:
    case Kind::kNamespace:
      return "[object Map]";
    default:
      return ToString();
  }
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "an undefined value";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kArray:
      return "a list";
    case Kind::kObject:
      return "a mapping";
    case Kind::kNamespace:
      return "a namespace";
    case Kind::kFunction:
      return "a function";
  }
  return "?";
}

const void* Value::identity() const {
  if (array_) return array_.get();
  if (entries_) return entries_.get();
  return fn_.get();
}

namespace {

// JSON.stringify's string escaping; with ensure_ascii, every UTF-16 unit above 0x7e as \uXXXX.
std::string JsonString(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else if (ensure_ascii && c >= 0x7f) {
      size_t len = 1;
      while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
      for (char16_t u : ToUtf16(s.substr(i, len))) out += fmt::format("\\u{:04x}", uint32_t{u});
      i += len - 1;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string ToJson(const Value& v, const JsonStyle& style, int depth) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return style.undefined_as_null ? "null" : "undefined";
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kBool:
      return v.boolean() ? "true" : "false";
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      return std::isfinite(v.number()) ? JsNumber(v.number()) : "null";
    case Value::Kind::kString:
      return JsonString(v.str(), style.ensure_ascii);
    case Value::Kind::kFunction:
      throw Error("cannot convert a function to JSON");
    default:
      break;
  }
  const bool indented = style.indent > 0;
  const std::string item_sep = !style.item_sep.empty() ? style.item_sep : indented ? "," : ", ";
  const std::string key_sep = !style.key_sep.empty() ? style.key_sep : ": ";
  const std::string pad = indented ? std::string(static_cast<size_t>(style.indent), ' ') : "";
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += pad;
  const std::string child = base + pad;
  std::vector<std::string> parts;
  if (v.is_array()) {
    for (const Value& e : v.array()) parts.push_back(ToJson(e, style, depth + 1));
  } else {
    auto entries = v.entries();
    if (style.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
        return ToUtf16(a.first) < ToUtf16(b.first);
      });
    for (const auto& [k, e] : entries)
      parts.push_back((indented ? child : "") + JsonString(k, style.ensure_ascii) + key_sep +
                      ToJson(e, style, depth + 1));
  }
  const char open = v.is_array() ? '[' : '{', close = v.is_array() ? ']' : '}';
  std::string out(1, open);
  if (indented && !parts.empty() && v.is_array()) out += child;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? item_sep + (indented && v.is_array() ? child : "") : "") + parts[i];
  if (indented && !parts.empty()) out += base;
  return out + close;
}

namespace {

// JavaScript ToNumber of a string: trimmed, "" is 0, otherwise a full decimal literal or NaN.
double JsStringToNumber(const std::string& s) {
  const std::string t = JsTrim(s, true, true);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  const bool word = t.find_first_of("xXiInN") != std::string::npos;  // strtod's extras
  return end == t.c_str() + t.size() && !word ? d : NAN;
}

bool IsPrimitive(const Value& v) {
  return v.kind() == Value::Kind::kBool || v.is_number() || v.is_string();
}

double PrimitiveNumber(const Value& v) {
  if (v.kind() == Value::Kind::kBool) return v.boolean() ? 1 : 0;
  if (v.is_number()) return v.number();
  return JsStringToNumber(v.str());
}

}  // namespace

bool StrictEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return a.boolean() == b.boolean();
    case Value::Kind::kString:
      return a.str() == b.str();
    default:
      return a.identity() == b.identity();
  }
}

bool LooseEquals(const Value& a, const Value& b) {
  const bool a_nullish = a.is_undefined() || a.is_none(),
             b_nullish = b.is_undefined() || b.is_none();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (IsPrimitive(a) && IsPrimitive(b)) {
    if (a.is_string() && b.is_string()) return a.str() == b.str();
    return PrimitiveNumber(a) == PrimitiveNumber(b);
  }
  if (!IsPrimitive(a) && !IsPrimitive(b)) return a.identity() == b.identity();
  // An array or object against a primitive compares its string form (JavaScript's ToPrimitive).
  const Value& compound = IsPrimitive(a) ? b : a;
  const Value& primitive = IsPrimitive(a) ? a : b;
  return LooseEquals(Value::String(compound.ConcatString()), primitive);
}

bool IsJsSpaceAt(std::string_view s, size_t i, size_t* len) {
  static constexpr std::string_view kWide[] = {"\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\xA8",
                                               "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
                                               "\xE3\x80\x80", "\xEF\xBB\xBF"};
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return *len = 1, true;
  for (auto w : kWide)
    if (s.substr(i, w.size()) == w) return *len = w.size(), true;
  if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) <= 0x8A)
    return *len = 3, true;  // U+2000..U+200A
  return false;
}

std::string JsTrim(std::string_view s, bool start, bool end) {
  size_t b = 0, len = 0;
  while (start && b < s.size() && IsJsSpaceAt(s, b, &len)) b += len;
  size_t e = s.size();
  while (end && e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!IsJsSpaceAt(s, k, &len) || k + len != e) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> CodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80 && len < 4)
      ++len;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::u16string ToUtf16(std::string_view s) {
  std::u16string out;
  for (const std::string& cp : CodePoints(s)) {
    const auto b0 = static_cast<unsigned char>(cp[0]);
    uint32_t c = b0;
    if (cp.size() > 1) {
      c = b0 & (0x7F >> cp.size());
      for (size_t i = 1; i < cp.size(); ++i)
        c = (c << 6) | (static_cast<unsigned char>(cp[i]) & 0x3F);
    }
    if (c >= 0x10000) {
      c -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (c >> 10));
      out += static_cast<char16_t>(0xDC00 + (c & 0x3FF));
    } else {
      out += static_cast<char16_t>(c);
    }
  }
  return out;
}

size_t Utf16Length(std::string_view s) {
  return ToUtf16(s).size();
}

std::string Utf8(uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  }
  if (cp >= 0x800) out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  if (cp >= 0x80) out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

std::string AsciiUpper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

std::string AsciiLower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace lockstep::jinja

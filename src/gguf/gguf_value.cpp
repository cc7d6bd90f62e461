// GGUF metadata values: typed accessors, constructors and the short rendering used by inspect.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace lockstep::gguf {

std::optional<int64_t> Value::AsInt() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}

std::optional<double> Value::AsFloat() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  // Integers only when the double holds them exactly (|x| <= 2^53 always does; larger values
  // must survive the round trip, checked without an out-of-range conversion).
  constexpr double kTwo63 = 9223372036854775808.0;
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    const double d = static_cast<double>(*u);
    if (d >= 2.0 * kTwo63) return std::nullopt;
    if (static_cast<uint64_t>(d) != *u) return std::nullopt;
    return d;
  }
  if (const auto* i = std::get_if<int64_t>(&v)) {
    const double d = static_cast<double>(*i);
    if (d >= kTwo63) return std::nullopt;
    if (static_cast<int64_t>(d) != *i) return std::nullopt;
    return d;
  }
  return std::nullopt;
}

std::optional<bool> Value::AsBool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::nullopt;
}

const std::string* Value::AsString() const {
  return std::get_if<std::string>(&v);
}
const Array* Value::AsArray() const {
  return std::get_if<Array>(&v);
}

Value Value::U32(uint32_t x) {
  return Value{ValueType::UINT32, uint64_t{x}};
}
Value Value::I32(int32_t x) {
  return Value{ValueType::INT32, int64_t{x}};
}
Value Value::U64(uint64_t x) {
  return Value{ValueType::UINT64, x};
}
Value Value::F32(float x) {
  return Value{ValueType::FLOAT32, static_cast<double>(x)};
}
Value Value::Bool(bool x) {
  return Value{ValueType::BOOL, x};
}
Value Value::Str(std::string s) {
  return Value{ValueType::STRING, std::move(s)};
}
Value Value::Arr(ValueType elem_type, std::vector<Value> items) {
  return Value{ValueType::ARRAY, Array{elem_type, std::move(items)}};
}

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "uint8";
    case ValueType::INT8:
      return "int8";
    case ValueType::UINT16:
      return "uint16";
    case ValueType::INT16:
      return "int16";
    case ValueType::UINT32:
      return "uint32";
    case ValueType::INT32:
      return "int32";
    case ValueType::FLOAT32:
      return "float32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "uint64";
    case ValueType::INT64:
      return "int64";
    case ValueType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

namespace {

// Quotes a string, escaping control bytes so a hostile key cannot garble a terminal.
std::string Quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string ToString(const Value& v, size_t max_items) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return fmt::format("{}", *u);
  if (const auto* i = std::get_if<int64_t>(&v.v)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&v.v)) {
    // A float32 prints its shortest float32 form, not the widened double's digits.
    if (v.type == ValueType::FLOAT32) return fmt::format("{}", static_cast<float>(*d));
    return fmt::format("{}", *d);
  }
  if (const auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v.v)) return Quote(*s, 200);
  const Array& a = std::get<Array>(v.v);
  std::string out = "[";
  for (size_t k = 0; k < a.items.size() && k < max_items; ++k) {
    if (k) out += ", ";
    out += ToString(a.items[k], max_items);
  }
  if (a.items.size() > max_items) out += fmt::format(", ... ({} items)", a.items.size());
  out += "]";
  return out;
}

}  // namespace lockstep::gguf

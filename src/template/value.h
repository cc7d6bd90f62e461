// Values of the Jinja interpreter: JSON-like data plus undefined, namespaces and callables, with
// the printing, truthiness and equality rules of the reference engine (@huggingface/jinja).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::jinja {

// A template error; `line` is the 1-based template line, 0 until a node on the way up names it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int line = 0)
      : std::runtime_error(message), line_(line) {}
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  int line_;
};

class Value;
struct CallContext;  // the interpreter and the caller's scope, for macros and caller()

// Arguments of a call: positional first, then keyword arguments in the order written.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};

using Function = std::function<Value(const Args&, CallContext&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kArray,
    kObject,
    kNamespace,
    kFunction
  };
  using Array = std::vector<Value>;
  // Insertion-ordered entries (JavaScript object order, which the reference engine iterates).
  using Entries = std::vector<std::pair<std::string, Value>>;

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(double v);  // numbers are doubles, as in the reference engine
  static Value Float(double v);
  static Value String(std::string s);
  static Value MakeArray(Array items);
  static Value MakeObject(Entries entries);
  static Value MakeNamespace(Entries entries);
  static Value MakeFunction(std::string name, Function fn);
  // JSON numbers that are whole become integers (JavaScript cannot tell 2.0 from 2).
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  // Objects and namespaces both hold named entries.
  bool has_entries() const { return is_object() || is_namespace(); }

  bool boolean() const { return b_; }
  double number() const { return num_; }
  const std::string& str() const { return str_; }
  const Array& array() const { return *array_; }
  const Entries& entries() const { return *entries_; }
  const std::string& function_name() const { return str_; }
  const Function& function() const { return *fn_; }

  // The entry named `key`, or nullptr.
  const Value* Find(std::string_view key) const;
  // Namespace attribute assignment (`{% set ns.x = ... %}`), visible through every copy.
  void SetEntry(const std::string& key, Value v) const;

  bool Truthy() const;
  // The text `{{ value }}` prints (empty for none and undefined is the caller's rule).
  std::string ToString() const;
  // JavaScript's String(value.value), which `+` and `~` concatenate.
  std::string ConcatString() const;
  // The type as error messages name it, with its article ("a string", "an integer", ...).
  const char* TypeName() const;
  // Identity of the shared storage, for JavaScript's reference equality of arrays and objects.
  const void* identity() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  double num_ = 0;
  std::string str_;
  std::shared_ptr<const Array> array_;
  std::shared_ptr<Entries> entries_;
  std::shared_ptr<const Function> fn_;
};

// JavaScript's Number.prototype.toString for a double (shortest round trip, 1e21 -> "1e+21").
std::string JsNumber(double d);

struct JsonStyle {
  int indent = -1;  // < 0: one line with ", " and ": "
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep;  // empty: the default for the indent
  std::string key_sep;
  bool undefined_as_null = true;
};
// `tojson` and the printing of arrays and objects.
std::string ToJson(const Value& v, const JsonStyle& style, int depth = 0);

// JavaScript loose equality (`==`) and strict equality (`in`, `equalto`) on values.
bool LooseEquals(const Value& a, const Value& b);
bool StrictEquals(const Value& a, const Value& b);

// Text helpers with JavaScript string semantics over UTF-8.
std::string JsTrim(std::string_view s, bool start, bool end);
bool IsJsSpaceAt(std::string_view s, size_t i, size_t* len);
size_t Utf16Length(std::string_view s);
std::vector<std::string> CodePoints(std::string_view s);
std::u16string ToUtf16(std::string_view s);
// The UTF-8 bytes of one code point (surrogates and values past U+10FFFF as U+FFFD).
std::string Utf8(uint32_t cp);
std::string AsciiUpper(std::string s);
std::string AsciiLower(std::string s);

}  // namespace lockstep::jinja

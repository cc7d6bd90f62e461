// Gemma 4 chat template rendered natively, statement by statement as its Jinja source reads
// (tests/js/gemma4.jinja, llama.cpp models/templates/gemma4.jinja). Value printing follows the
// reference engine (@huggingface/jinja): 2.0 prints "2", null prints "", booleans "true".
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace lockstep::tokenizer {
namespace {

using nlohmann::json;
constexpr std::string_view kQ = "<|\"|>";  // Gemma 4's string-quote token

struct Known {
  uint64_t fnv1a;
  size_t size;
  const char* name;
};
// Templates this renderer reproduces; the fingerprint covers the whole text, so any edit is
// refused rather than rendered approximately.
constexpr Known kKnown[] = {
    {0x5277788f76fd9928ull, 12896, "llama.cpp models/templates/gemma4.jinja @ a20c1a89"},
};

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct RenderError {
  std::string message;
};

const json* Get(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// Jinja truthiness; a missing key (nullptr) is undefined, hence false.
bool Truthy(const json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number_unsigned()) return v->get<uint64_t>() != 0;
  if (v->is_number_float()) return v->get<double>() != 0.0;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  return !v->empty();
}

std::string Text(const json* v) {
  if (v == nullptr || v->is_null()) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  if (v->is_number_unsigned()) return std::to_string(v->get<uint64_t>());
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e21)
      return fmt::format("{:.0f}", d);
    return fmt::format("{}", d);
  }
  return v->dump();
}

bool IsWs(std::string_view s, size_t i, size_t& len) {
  static constexpr std::string_view kWide[] = {"\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\xA8",
                                               "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
                                               "\xE3\x80\x80", "\xEF\xBB\xBF"};
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return len = 1, true;
  for (auto w : kWide)
    if (s.substr(i, w.size()) == w) return len = w.size(), true;
  if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) <= 0x8A)
    return len = 3, true;  // U+2000..U+200A
  return false;
}

// JS String.prototype.trim (the reference engine's `trim`).
std::string Trim(std::string_view s) {
  size_t b = 0, len = 0;
  while (b < s.size() && IsWs(s, b, len)) b += len;
  size_t e = s.size();
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!IsWs(s, k, len) || k + len != e) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

std::string Upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// dictsort: case-insensitive by key, stable.
std::vector<std::pair<std::string, const json*>> DictSort(const json& obj) {
  std::vector<std::pair<std::string, const json*>> v;
  for (auto it = obj.begin(); it != obj.end(); ++it) v.emplace_back(it.key(), &it.value());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(a.first.begin(), a.first.end(), b.first.begin(),
                                        b.first.end(), [](char x, char y) {
                                          return std::tolower(static_cast<unsigned char>(x)) <
                                                 std::tolower(static_cast<unsigned char>(y));
                                        });
  });
  return v;
}

// `type` that is a string, or the first non-"null" entry of a list, upper-cased.
std::string EffectiveType(const json* t) {
  if (t == nullptr) return {};
  if (t->is_string()) return Upper(t->get<std::string>());
  if (t->is_array())
    for (const json& e : *t)
      if (!(e.is_string() && e.get<std::string>() == "null")) return Upper(Text(&e));
  return {};
}

std::string QuotedList(const json* items) {
  std::string s;
  if (items == nullptr || !items->is_array()) return s;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) s += ',';
    s += std::string(kQ) + Text(&(*items)[i]) + std::string(kQ);
  }
  return s;
}

std::string FormatArgument(const json& a, bool escape_keys) {
  if (a.is_string()) return std::string(kQ) + a.get<std::string>() + std::string(kQ);
  if (a.is_boolean()) return a.get<bool>() ? "true" : "false";
  if (a.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : DictSort(a)) {
      if (!first) s += ',';
      first = false;
      s += escape_keys ? std::string(kQ) + k + std::string(kQ) : k;
      s += ':' + FormatArgument(*v, escape_keys);
    }
    return s + "}";
  }
  if (a.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < a.size(); ++i) s += (i ? "," : "") + FormatArgument(a[i], escape_keys);
    return s + "]";
  }
  return Text(&a);
}

std::string FormatParameters(const json& properties);

// The ARRAY branch's `items:{...}` body.
std::string FormatItems(const json& items) {
  std::string s;
  bool found = false;
  for (const auto& [key, v] : DictSort(items)) {
    if (v->is_null()) continue;
    if (found) s += ',';
    found = true;
    if (key == "properties") {
      s += "properties:{";
      if (v->is_object()) s += FormatParameters(*v);
      s += "}";
    } else if (key == "required") {
      s += "required:[" + QuotedList(v) + "]";
    } else if (key == "type") {
      s += "type:" + FormatArgument(json(EffectiveType(v)), true);
    } else {
      s += key + ":" + FormatArgument(*v, true);
    }
  }
  return s;
}

std::string FormatParameters(const json& properties) {
  static const char* kStandard[] = {"description", "type", "properties", "required", "nullable"};
  std::string s;
  bool found_first = false;
  for (const auto& [key, vp] : DictSort(properties)) {
    if (std::find(std::begin(kStandard), std::end(kStandard), key) != std::end(kStandard)) continue;
    const json& value = *vp;
    if (found_first) s += ',';
    found_first = true;
    const std::string type = EffectiveType(Get(value, "type"));
    bool add_comma = false;
    s += key + ":{";
    if (Truthy(Get(value, "description"))) {
      s += "description:" + std::string(kQ) + Text(Get(value, "description")) + std::string(kQ);
      add_comma = true;
    }
    const auto comma = [&] {
      if (add_comma) s += ',';
      add_comma = true;
    };
    if (Truthy(Get(value, "nullable"))) comma(), s += "nullable:true";
    if (type == "STRING") {
      if (Truthy(Get(value, "enum"))) comma(), s += "enum:" + FormatArgument(value["enum"], true);
    } else if (type == "OBJECT") {
      s += ",properties:{";
      const json* props = Get(value, "properties");
      if (props != nullptr && props->is_object())
        s += FormatParameters(*props);
      else if (value.is_object())
        s += FormatParameters(value);
      s += "}";
      if (Truthy(Get(value, "required")))
        s += ",required:[" + QuotedList(Get(value, "required")) + "]";
    } else if (type == "ARRAY") {
      const json* items = Get(value, "items");
      if (items != nullptr && items->is_object() && !items->empty())
        s += ",items:{" + FormatItems(*items) + "}";
    }
    comma();
    s += "type:" + std::string(kQ) + type + std::string(kQ) + "}";
  }
  return s;
}

std::string FormatFunctionDeclaration(const json& tool) {
  const json* fn = Get(tool, "function");
  if (fn == nullptr || !fn->is_object()) throw RenderError{"a tool has no 'function' object"};
  std::string s = "declaration:" + Text(Get(*fn, "name")) + "{description:" + std::string(kQ) +
                  Text(Get(*fn, "description")) + std::string(kQ);
  const json* params = Get(*fn, "parameters");
  if (Truthy(params)) {
    s += ",parameters:{";
    if (Truthy(Get(*params, "properties")))
      s += "properties:{" + FormatParameters((*params)["properties"]) + "},";
    if (Truthy(Get(*params, "required")))
      s += "required:[" + QuotedList(Get(*params, "required")) + "],";
    const json* t = Get(*params, "type");
    if (Truthy(t)) s += "type:" + std::string(kQ) + EffectiveType(t) + std::string(kQ) + "}";
  }
  if (const json* r = Get(*fn, "response"); r != nullptr) {
    s += ",response:{";
    if (Truthy(Get(*r, "description")))
      s += "description:" + std::string(kQ) + Text(Get(*r, "description")) + std::string(kQ) + ",";
    const std::string rt = EffectiveType(Get(*r, "type"));
    if (rt == "OBJECT") s += "type:" + std::string(kQ) + rt + std::string(kQ) + "}";
  }
  return s + "}";
}

// Drops every `<|channel>...<channel|>` span, then trims.
std::string StripThinking(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t close = text.find("<channel|>", pos);
    const std::string part =
        text.substr(pos, close == std::string::npos ? std::string::npos : close - pos);
    const size_t open = part.find("<|channel>");
    out += open == std::string::npos ? part : part.substr(0, open);
    if (close == std::string::npos) break;
    pos = close + 10;
  }
  return Trim(out);
}

}  // namespace

namespace {

void RenderToolCalls(const json& calls, std::string& out) {
  for (const json& tc : calls) {
    const json* fn = Get(tc, "function");
    if (fn == nullptr) throw RenderError{"a tool call has no 'function'"};
    out += "<|tool_call>call:" + Text(Get(*fn, "name")) + "{";
    const json* args = Get(*fn, "arguments");
    if (args != nullptr && args->is_object()) {
      bool first = true;
      for (const auto& [k, v] : DictSort(*args)) {
        if (!first) out += ',';
        first = false;
        out += k + ":" + FormatArgument(*v, false);
      }
    } else if (args != nullptr && args->is_string()) {
      out += args->get<std::string>();
    }
    out += "}<tool_call|>";
  }
}

void RenderToolResponses(const json& responses, std::string& out) {
  for (const json& tr : responses) {
    out += "<|tool_response>";
    const json* name = Get(tr, "name");
    const std::string nm = name == nullptr ? "unknown" : Text(name);
    const json* r = Get(tr, "response");
    if (r != nullptr && r->is_object()) {
      out += "response:" + nm + "{";
      bool first = true;
      for (const auto& [k, v] : DictSort(*r)) {
        if (!first) out += ',';
        first = false;
        out += k + ":" + FormatArgument(*v, false);
      }
      out += "}";
    } else {
      out += "response:" + nm + "{value:" + (r ? FormatArgument(*r, false) : std::string()) + "}";
    }
    out += "<tool_response|>";
  }
}

// One message's body; returns the message type the template tracks in ns.prev_message_type.
std::string RenderContent(const json& m, const std::string& role, std::string& out) {
  std::string prev;
  const json* content = Get(m, "content");
  if (content != nullptr && content->is_string()) {
    out += role == "model" ? StripThinking(content->get<std::string>())
                           : Trim(content->get<std::string>());
  } else if (content != nullptr && content->is_array()) {
    for (const json& item : *content) {
      const std::string type = Text(Get(item, "type"));
      const std::string text = Text(Get(item, "text"));
      if (type == "text")
        out += role == "model" ? StripThinking(text) : Trim(text);
      else if (type == "image")
        out += "\n\n<|image|>\n\n", prev = "image";
      else if (type == "audio")
        out += "<|audio|>", prev = "audio";
      else if (type == "video")
        out += "\n\n<|video|>\n\n", prev = "video";
    }
  }
  return prev;
}

std::string Render(const json& messages, const ChatOptions& o) {
  if (!messages.is_array() || messages.empty() || !messages[0].is_object())
    throw RenderError{"messages must be a non-empty array of objects"};
  for (const json& m : messages)
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw RenderError{"every message needs a string 'role'"};
  std::string out = o.bos_token;
  std::string prev;
  const bool thinking = o.enable_thinking.value_or(false);
  const std::string role0 = messages[0]["role"].get<std::string>();
  const bool sys0 = role0 == "system" || role0 == "developer";
  size_t first = 0;
  if (thinking || Truthy(&o.tools) || sys0) {
    out += "<|turn>system\n";
    if (thinking) out += "<|think|>", prev = "think";
    if (sys0) {
      const json* c = Get(messages[0], "content");
      if (c != nullptr && !c->is_string() && !c->is_null())
        throw RenderError{"the system message's content must be a string"};
      out += Trim(Text(c));
      first = 1;
    }
    if (Truthy(&o.tools)) {
      for (const json& tool : o.tools)
        out += "<|tool>" + Trim(FormatFunctionDeclaration(tool)) + "<tool|>";
      prev = "tool";
    }
    out += "<turn|>\n";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const json& m = messages[i];
    prev.clear();
    const std::string r = m["role"].get<std::string>();
    const std::string role = r == "assistant" ? "model" : r;
    out += "<|turn>" + role + "\n";
    if (Truthy(Get(m, "tool_calls"))) RenderToolCalls(m["tool_calls"], out), prev = "tool_call";
    const bool has_responses = Truthy(Get(m, "tool_responses"));
    if (has_responses) RenderToolResponses(m["tool_responses"], out), prev = "tool_response";
    const std::string p = RenderContent(m, role, out);
    if (!p.empty()) prev = p;
    if (!(has_responses && !Truthy(Get(m, "content")))) out += "<turn|>\n";
  }
  if (o.add_generation_prompt) {
    if (prev != "tool_response") out += "<|turn>model\n";
    if (!thinking) out += "<|channel>thought\n<channel|>";
  }
  return out;
}

}  // namespace

Status CheckChatTemplate(const std::string& t) {
  const uint64_t h = Fnv1a(t);
  for (const Known& k : kKnown)
    if (k.fnv1a == h && k.size == t.size()) return Status::Ok();
  return Status::Errorf(
      "chat template not recognised ({} bytes, fnv1a {:016x}): lockstep renders chat templates "
      "natively and supports only {}; pass a supported template or format the prompt yourself",
      t.size(), h, kKnown[0].name);
}

Expected<std::string> RenderChat(const std::string& template_text, const json& messages,
                                 const ChatOptions& options) {
  LS_RETURN_IF_ERROR(CheckChatTemplate(template_text));
  try {
    return Render(messages, options);
  } catch (const RenderError& e) {
    return Status::Errorf("chat template: {}", e.message);
  } catch (const json::exception& e) {
    return Status::Errorf("chat template: malformed message JSON: {}", e.what());
  }
}

}  // namespace lockstep::tokenizer

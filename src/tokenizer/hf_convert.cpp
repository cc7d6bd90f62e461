// Hugging Face tokenizer.json (+ tokenizer_config.json) to llama.cpp's gemma4 tokenizer.* keys.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::tokenizer {
namespace {

using nlohmann::json;

Expected<json> ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Errorf("{}: not valid JSON", path);
  return j;
}

// The seven Gemma 4 tokens llama.cpp's converter forces to USER_DEFINED so they render as text.
const std::set<std::string>& UserDefinedNames() {
  static const std::set<std::string> k = {"<|channel>",   "<channel|>",       "<|tool_call>",
                                          "<tool_call|>", "<|tool_response>", "<tool_response|>",
                                          "<|\"|>"};
  return k;
}

bool IsByteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  return std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

// tokenizer_config's "bos_token" etc. are a string or {"content": ...}.
std::string TokenName(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

}  // namespace

Status AddTokenizerFromHfJson(const std::string& tokenizer_json_path,
                              const std::string& tokenizer_config_path_or_empty, gguf::Writer& w) {
  const std::string& p = tokenizer_json_path;
  LS_ASSIGN_OR_RETURN(json j, ReadJson(p));
  json cfg = json::object();
  if (!tokenizer_config_path_or_empty.empty()) {
    LS_ASSIGN_OR_RETURN(cfg, ReadJson(tokenizer_config_path_or_empty));
  }
  if (!j.contains("model") || !j["model"].is_object())
    return Status::Errorf("{}: no \"model\" object", p);
  const json& m = j["model"];
  if (m.value("type", std::string()) != "BPE")
    return Status::Errorf("{}: model.type is '{}', only BPE is supported", p,
                          m.value("type", std::string("?")));
  if (!m.contains("vocab") || !m["vocab"].is_object())
    return Status::Errorf("{}: model.vocab is not an object", p);

  std::map<int64_t, std::string> by_id;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
      return Status::Errorf("{}: model.vocab['{}'] is not a non-negative integer id", p, it.key());
    by_id[it.value().get<int64_t>()] = it.key();
  }
  std::map<int64_t, bool> added_special;  // id -> special flag
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& a : j["added_tokens"]) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        return Status::Errorf("{}: an added_tokens entry lacks an integer id or string content", p);
      const int64_t id = a["id"].get<int64_t>();
      by_id[id] = a["content"].get<std::string>();
      added_special[id] = a.value("special", false);
    }
  }
  if (by_id.empty()) return Status::Errorf("{}: empty vocabulary", p);
  const int64_t n = by_id.rbegin()->first + 1;
  if (n > (1 << 24)) return Status::Errorf("{}: token id {} is implausibly large", p, n - 1);

  std::vector<gguf::Value> tokens, scores, types;
  tokens.reserve(static_cast<size_t>(n));
  scores.reserve(static_cast<size_t>(n));
  types.reserve(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    TokenType ty = TokenType::kNormal;
    std::string text;
    if (it == by_id.end()) {
      text = fmt::format("[PAD{}]", id);  // a hole in the id space, as llama.cpp pads
      ty = TokenType::kUnused;
    } else {
      text = it->second;
      auto sp = added_special.find(id);
      if (sp != added_special.end() && sp->second)
        ty = UserDefinedNames().count(text) ? TokenType::kUserDefined : TokenType::kControl;
      else if (IsByteToken(text))
        ty = TokenType::kByte;
    }
    const bool special = ty == TokenType::kControl || ty == TokenType::kUserDefined;
    tokens.push_back(gguf::Value::Str(std::move(text)));
    scores.push_back(gguf::Value::F32(special ? -1000.0f : 0.0f));
    types.push_back(gguf::Value::I32(static_cast<int32_t>(ty)));
  }

  std::vector<gguf::Value> merges;
  if (m.contains("merges") && m["merges"].is_array()) {
    merges.reserve(m["merges"].size());
    for (const json& mg : m["merges"]) {
      if (mg.is_string()) {
        merges.push_back(gguf::Value::Str(mg.get<std::string>()));
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        merges.push_back(
            gguf::Value::Str(mg[0].get<std::string>() + " " + mg[1].get<std::string>()));
      } else {
        return Status::Errorf("{}: model.merges[{}] is neither \"a b\" nor [a, b]", p,
                              merges.size());
      }
    }
  }

  // Token ids of named specials: tokenizer_config first, then the usual Gemma names.
  std::unordered_map<std::string_view, int64_t> text_to_id;
  text_to_id.reserve(by_id.size());
  for (const auto& [id, t] : by_id) text_to_id.emplace(t, id);
  auto id_of = [&](const std::string& name) -> int64_t {
    auto it = text_to_id.find(name);
    return name.empty() || it == text_to_id.end() ? -1 : it->second;
  };
  auto pick = [&](const char* cfg_key, const char* fallback) {
    int64_t id = id_of(TokenName(cfg, cfg_key));
    return id >= 0 ? id : id_of(fallback);
  };
  w.Set("tokenizer.ggml.model", gguf::Value::Str("gemma4"));
  w.Set("tokenizer.ggml.tokens", gguf::Value::Arr(gguf::ValueType::STRING, std::move(tokens)));
  w.Set("tokenizer.ggml.scores", gguf::Value::Arr(gguf::ValueType::FLOAT32, std::move(scores)));
  w.Set("tokenizer.ggml.token_type", gguf::Value::Arr(gguf::ValueType::INT32, std::move(types)));
  w.Set("tokenizer.ggml.merges", gguf::Value::Arr(gguf::ValueType::STRING, std::move(merges)));
  const std::pair<const char*, int64_t> ids[] = {
      {"tokenizer.ggml.bos_token_id", pick("bos_token", "<bos>")},
      {"tokenizer.ggml.eos_token_id", pick("eos_token", "<eos>")},
      {"tokenizer.ggml.unknown_token_id", pick("unk_token", "<unk>")},
      {"tokenizer.ggml.padding_token_id", pick("pad_token", "<pad>")}};
  for (const auto& [key, id] : ids)
    if (id >= 0) w.Set(key, gguf::Value::U32(static_cast<uint32_t>(id)));
  w.Set("tokenizer.ggml.add_bos_token", gguf::Value::Bool(true));
  w.Set("tokenizer.ggml.add_space_prefix", gguf::Value::Bool(false));
  if (cfg.contains("chat_template")) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) {
      w.Set("tokenizer.chat_template", gguf::Value::Str(t.get<std::string>()));
    } else if (t.is_array()) {  // [{name, template}, ...]: "default" is the main one
      for (const json& e : t)
        if (e.is_object() && e.value("name", std::string()) == "default" &&
            e["template"].is_string())
          w.Set("tokenizer.chat_template", gguf::Value::Str(e["template"].get<std::string>()));
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::tokenizer

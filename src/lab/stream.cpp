// Reading token streams from the JSON shapes lockstep and llama-server write.
#include "lab/stream.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace lockstep::lab {
namespace {

using nlohmann::json;

// One id from either a bare integer or an object with "id" (llama-server's per-token records).
Expected<int32_t> IdOf(const json& v, const std::string& what, size_t i) {
  const json* p = &v;
  if (v.is_object()) {
    auto it = v.find("id");
    if (it == v.end()) return Status::Errorf("{}: element {} has no \"id\"", what, i);
    p = &*it;
  }
  if (!p->is_number_integer())
    return Status::Errorf("{}: element {} is not a token id: {}", what, i, p->dump());
  const int64_t id = p->get<int64_t>();
  if (id < 0 || id > INT32_MAX)
    return Status::Errorf("{}: element {} = {} is out of range", what, i, id);
  return static_cast<int32_t>(id);
}

Expected<std::vector<int32_t>> IdArray(const json& a, const std::string& what) {
  if (!a.is_array()) return Status::Errorf("{}: expected an array of token ids", what);
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    LS_ASSIGN_OR_RETURN(int32_t id, IdOf(a[i], what, i));
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

Expected<Stream> ParseStreamJson(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Errorf("{}: not valid JSON", what);
  Stream s;
  s.source = what;
  if (j.is_array()) {
    LS_ASSIGN_OR_RETURN(s.tokens, IdArray(j, what));
  } else if (j.is_object()) {
    if (j.contains("tokens")) {
      LS_ASSIGN_OR_RETURN(s.tokens, IdArray(j["tokens"], what + ": \"tokens\""));
    } else if (j.contains("completion_probabilities")) {
      LS_ASSIGN_OR_RETURN(s.tokens, IdArray(j["completion_probabilities"],
                                            what + ": \"completion_probabilities\""));
    } else {
      return Status::Errorf("{}: the object has no \"tokens\" (or \"completion_probabilities\")",
                            what);
    }
    for (const char* key : {"prompt_tokens", "prompt_ids"})
      if (j.contains(key)) {
        LS_ASSIGN_OR_RETURN(s.prompt, IdArray(j[key], what + ": \"" + key + "\""));
        break;
      }
  } else {
    return Status::Errorf("{}: expected a JSON array of ids or an object with \"tokens\"", what);
  }
  if (s.tokens.empty()) return Status::Errorf("{}: the stream has no tokens", what);
  return s;
}

Expected<Stream> LoadStreamFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseStreamJson(ss.str(), path);
}

}  // namespace lockstep::lab

// Flattening run records to path/value pairs and listing what differs.
#include "lab/identity_diff.h"

#include <fstream>
#include <map>
#include <sstream>

namespace lockstep::lab {
namespace {

void Flatten(const nlohmann::json& j, const std::string& path,
             std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      Flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (j.is_array() && !j.empty() && !j.front().is_primitive()) {
    for (size_t i = 0; i < j.size(); ++i) Flatten(j[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    out->emplace_back(path, j.dump());  // scalars and arrays of scalars compare whole
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FlattenJson(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  Flatten(j, "", &out);
  return out;
}

std::vector<FieldDiff> DiffIdentity(const nlohmann::json& a, const nlohmann::json& b) {
  const bool both = a.contains("identity") && b.contains("identity");
  std::map<std::string, std::pair<std::string, std::string>> fields;
  const std::string kMissing = "<missing>";
  for (auto& [k, v] : FlattenJson(both ? a["identity"] : a)) fields[k] = {v, kMissing};
  for (auto& [k, v] : FlattenJson(both ? b["identity"] : b)) {
    auto it = fields.find(k);
    if (it == fields.end())
      fields[k] = {kMissing, v};
    else
      it->second.second = v;
  }
  std::vector<FieldDiff> out;
  for (auto& [k, v] : fields)
    if (v.first != v.second) out.push_back({k, v.first, v.second});
  return out;
}

Expected<nlohmann::json> LoadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Status::Errorf("{}: not valid JSON", path);
  return j;
}

}  // namespace lockstep::lab

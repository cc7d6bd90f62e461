// Field-by-field difference of two run records' identity blocks.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace lockstep::lab {

struct FieldDiff {
  std::string field;  // dotted path, e.g. "settings.draft_max"
  std::string a, b;   // JSON text of each side; "<missing>" where a side lacks the field
};

// Leaves of a JSON value as dotted paths (array elements as path[i]) mapped to their JSON text.
std::vector<std::pair<std::string, std::string>> FlattenJson(const nlohmann::json& j);

// Differences between a's and b's "identity" objects (or the whole objects when either has
// none), in path order.
std::vector<FieldDiff> DiffIdentity(const nlohmann::json& a, const nlohmann::json& b);

Expected<nlohmann::json> LoadJsonFile(const std::string& path);

}  // namespace lockstep::lab

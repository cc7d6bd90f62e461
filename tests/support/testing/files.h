// File checks shared by tests of atomic writers.
#pragma once

#include <filesystem>
#include <string>

namespace lockstep::testing {

// Temporaries a writer of `path` may leave next to it ("<name>.tmp..."): how many exist.
inline int TempSiblings(const std::filesystem::path& path) {
  const std::string prefix = path.filename().string() + ".tmp";
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path.parent_path(), ec))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

}  // namespace lockstep::testing

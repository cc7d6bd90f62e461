// Prompt sources, escapes, core count and terminal detection for the CLI.
#include "cli/prompt_text.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

namespace lockstep::cli {

std::string ProcessEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x':
        if (i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
          out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\', out += e;
    }
  }
  return out;
}

Expected<std::string> ReadPrompt(const std::string& prompt_arg, const std::string& file_arg) {
  if (!prompt_arg.empty() && !file_arg.empty())
    return Status::Error("give the prompt with -p or with -f, not both");
  if (prompt_arg == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (file_arg.empty()) return prompt_arg;
  std::ifstream in(file_arg, std::ios::binary);
  if (!in) return Status::Errorf("-f {}: cannot open", file_arg);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int PhysicalCoresFromCpuinfo(std::istream& cpuinfo, int fallback) {
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string line, package = "0";
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (line.rfind("physical id", 0) == 0) package = value;
    if (line.rfind("core id", 0) == 0) cores.emplace(package, value);
  }
  return cores.empty() ? std::max(1, fallback) : static_cast<int>(cores.size());
}

int PhysicalCores() {
  std::ifstream in("/proc/cpuinfo");
  return PhysicalCoresFromCpuinfo(in, static_cast<int>(std::thread::hardware_concurrency()));
}

bool StderrIsTerminal() {
  return isatty(STDERR_FILENO) == 1;
}

}  // namespace lockstep::cli

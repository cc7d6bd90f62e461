// Runs the lockstep executable for end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace lockstep::testing {

// `binary args` with stderr merged into stdout; sets *rc to the exit status.
inline std::string RunCli(const std::string& binary, const std::string& args, int* rc) {
  const std::string cmd = binary + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(f));
  return out;
}

}  // namespace lockstep::testing

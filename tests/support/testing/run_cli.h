// Runs the lockstep executable (or node) for end-to-end CLI tests, never longer than a deadline.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace lockstep::testing {

// Every command a test runs is bounded: a hung child must fail its test by name, not stall the
// whole suite (ctest waits for every process holding its output pipe). coreutils' `timeout`
// sends SIGTERM at the deadline, SIGKILL 10 s later, and exits 124 (137 after the KILL).
inline constexpr int kCliDeadlineSeconds = 300;

// `cmd` as one single-quoted shell word.
inline std::string ShellQuote(const std::string& cmd) {
  std::string quoted = "'";
  for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs a shell command line (pipes, redirections and all) under the deadline; returns its
// stdout and sets *rc to its exit status (124 or 137: the deadline was hit).
inline std::string RunShell(const std::string& cmd, int* rc) {
  const std::string bounded =
      "timeout -k 10 " + std::to_string(kCliDeadlineSeconds) + " sh -c " + ShellQuote(cmd);
  FILE* f = popen(bounded.c_str(), "r");
  std::string out;
  if (f == nullptr) {
    *rc = -1;
    return "popen failed: " + cmd;
  }
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(f));
  return out;
}

// `binary args` with stderr merged into stdout, under the deadline.
inline std::string RunCli(const std::string& binary, const std::string& args, int* rc) {
  return RunShell(binary + " " + args + " 2>&1", rc);
}

}  // namespace lockstep::testing

// CHECK: invariants that only a bug can break; failing aborts with the location and message.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace lockstep::detail {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr,
                                     const std::string& msg) {
  std::fprintf(stderr, "lockstep: CHECK failed at %s:%d: %s %s\n", file, line, expr, msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace lockstep::detail

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) ::lockstep::detail::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define CHECKF(cond, ...)                                                    \
  do {                                                                       \
    if (!(cond))                                                             \
      ::lockstep::detail::CheckFailed(__FILE__, __LINE__, #cond,             \
                                      fmt::format(__VA_ARGS__));             \
  } while (0)

// FailAt: the CUDA backend's CHECK failure path, formatted with vsnprintf; the switch of
// kernels not yet run on a GPU.
#include "backend/cuda/common.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"

namespace lockstep::backend::cuda {

void FailAt(const char* file, int line, const char* format, ...) {
  char msg[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(msg, sizeof(msg), format, args);
  va_end(args);
  ::lockstep::detail::CheckFailed(file, line, "cuda", std::string(msg));
}

bool UnverifiedKernelOn(const char* name) {
  const char* env = std::getenv("LOCKSTEP_CUDA_UNVERIFIED");
  return env && (std::strcmp(env, "1") == 0 || std::strstr(env, name) != nullptr);
}

}  // namespace lockstep::backend::cuda

// The backend factory: the only code above backend/ that knows which backends exist.
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace lockstep::backend {

std::unique_ptr<Backend> Create(std::string_view name, int n_threads) {
  if (name == "cpu") return std::make_unique<CpuBackend>(n_threads);
  return nullptr;
}

std::vector<std::string> Available() {
  return {"cpu"};
}

}  // namespace lockstep::backend

// The backend factory: the only code above backend/ that knows which backends exist.
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep::backend {

std::unique_ptr<Backend> Create(std::string_view name, int n_threads) {
  if (name == "cpu") return std::make_unique<CpuBackend>(n_threads);
#if LOCKSTEP_HAS_CUDA
  if (name == "cuda") {
    auto be = CudaBackend::Create(0);
    if (!be.ok()) return nullptr;
    return std::move(be).value();
  }
#endif
  return nullptr;
}

std::vector<std::string> Available() {
#if LOCKSTEP_HAS_CUDA
  if (CudaBackend::DeviceCount() > 0) return {"cpu", "cuda"};
#endif
  return {"cpu"};
}

}  // namespace lockstep::backend

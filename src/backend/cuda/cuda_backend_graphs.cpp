// CudaBackend's replayable steps: a forward pass captured once per step shape into a CUDA graph
// and replayed, so a decode step costs one launch instead of one per op. A replay runs the
// captured kernels with the captured arguments: the same bits as running them one by one.
#include <cuda_runtime.h>

#include <unordered_map>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_backend.h"
#include "core/check.h"

namespace lockstep::backend {

namespace {

// Shapes a workspace keeps captured; past this, new shapes run op by op (a server's mix of
// prefill chunk sizes should not pin unbounded graph memory).
constexpr size_t kMaxGraphs = 64;

struct Capture {
  int seen = 0;                    // plain runs so far (the first one sizes scratch buffers)
  cudaGraphExec_t exec = nullptr;  // the instantiated capture, once made
  uint64_t scratch_generation = 0;
};

class CudaReplays : public Replays {
 public:
  ~CudaReplays() override {
    for (auto& [key, c] : captures)
      if (c.exec) cudaGraphExecDestroy(c.exec);
  }
  std::unordered_map<uint64_t, Capture> captures;
};

}  // namespace

std::unique_ptr<Replays> CudaBackend::NewReplays() {
  return std::make_unique<CudaReplays>();
}

void CudaBackend::RunReplayable(Replays* replays, uint64_t key, FunctionRef<void()> record) {
  auto* store = static_cast<CudaReplays*>(replays);
  if (!store || key == 0 ||
      (store->captures.size() >= kMaxGraphs && !store->captures.contains(key))) {
    record();
    return;
  }
  Capture& c = store->captures[key];
  if (c.exec && c.scratch_generation != scratch_generation_) {  // names a freed scratch buffer
    LS_CUDA_CHECK(cudaGraphExecDestroy(c.exec));
    c = Capture{};
  }
  if (!c.exec && c.seen++ == 0) {
    record();
    return;
  }
  if (!c.exec) {
    cudaStream_t stream = stream_;
    LS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    record();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    LS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    LS_CUDA_CHECK(cudaGraphInstantiate(&c.exec, graph, 0));
    LS_CUDA_CHECK(cudaGraphDestroy(graph));
    c.scratch_generation = scratch_generation_;
  }
  LS_CUDA_CHECK(cudaGraphLaunch(c.exec, stream_));
  ++replays_launched_;
}

}  // namespace lockstep::backend

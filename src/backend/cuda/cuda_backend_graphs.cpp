// CudaBackend's replayable steps: a forward pass captured once per step shape into a CUDA graph
// and replayed, so a decode step costs one launch instead of one per op. A replay runs the
// captured kernels with the captured arguments: the same bits as running them one by one.
#include <cuda_runtime.h>

#include <cstdlib>
#include <unordered_map>
#include <vector>

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

// Programmatic dependent launch (docs/kernels.md): every kernel-to-kernel edge of a captured step
// becomes a programmatic edge from the upstream kernel's launch-completion port, so a kernel's
// blocks are placed on the multiprocessors while the kernel before it still runs, and load what
// no kernel writes (weights) before they wait in AwaitPriorKernels (common.cuh) for the kernels
// before them to finish. Only when a kernel starts changes, never what it reads: the same bits.
// False (the graph unchanged or only partly changed) when the driver refuses an edge.
bool MakeKernelEdgesProgrammatic(cudaGraph_t graph) {
  size_t n = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess) return false;
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n) != cudaSuccess)
    return false;
  const auto is_kernel = [](cudaGraphNode_t node) {
    cudaGraphNodeType type{};
    return cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel;
  };
  std::vector<cudaGraphNode_t> kfrom, kto;
  std::vector<cudaGraphEdgeData> old_data;
  for (size_t i = 0; i < n; ++i) {
    if (data[i].type != cudaGraphDependencyTypeDefault || data[i].from_port != 0) continue;
    if (!is_kernel(from[i]) || !is_kernel(to[i])) continue;
    kfrom.push_back(from[i]);
    kto.push_back(to[i]);
    old_data.push_back(data[i]);
  }
  if (kfrom.empty()) return true;
  cudaGraphEdgeData edge{};
  edge.from_port = cudaGraphKernelNodePortLaunchCompletion;
  edge.type = cudaGraphDependencyTypeProgrammatic;
  const std::vector<cudaGraphEdgeData> new_data(kfrom.size(), edge);
  return cudaGraphRemoveDependencies(graph, kfrom.data(), kto.data(), old_data.data(),
                                     kfrom.size()) == cudaSuccess &&
         cudaGraphAddDependencies(graph, kfrom.data(), kto.data(), new_data.data(), kfrom.size()) ==
             cudaSuccess;
}

// Instantiates a captured step, with programmatic kernel edges where `programmatic` (falling back
// to the capture as it is when the driver refuses them).
cudaGraphExec_t Instantiate(cudaGraph_t graph, bool programmatic) {
  cudaGraphExec_t exec = nullptr;
  if (programmatic) {
    cudaGraph_t pdl = nullptr;
    LS_CUDA_CHECK(cudaGraphClone(&pdl, graph));
    const bool made =
        MakeKernelEdgesProgrammatic(pdl) && cudaGraphInstantiate(&exec, pdl, 0) == cudaSuccess;
    LS_CUDA_CHECK(cudaGraphDestroy(pdl));
    if (made) return exec;
    (void)cudaGetLastError();  // the refusal is not an error of a later call
    exec = nullptr;
  }
  LS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return exec;
}

// Whether captured steps launch kernels programmatically on `device`.
bool ProgrammaticLaunch(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  // griddepcontrol exists from sm_90 on; LOCKSTEP_CUDA_PDL=0 turns it off (A/B timing, debugging).
  const char* env = std::getenv("LOCKSTEP_CUDA_PDL");
  return major >= 9 && !(env && env[0] == '0');
}

}  // namespace

std::unique_ptr<Replays> CudaBackend::NewReplays() {
  return std::make_unique<CudaReplays>();
}

void CudaBackend::RunReplayable(Replays* replays, uint64_t key, FunctionRef<void()> record) {
  // Quantized norm copies made before a step are not the step's to read (its replay would not
  // rerun their norms), nor the step's copies those of the ops after it (a replay rewrites their
  // tensors without the host seeing it).
  ForgetQuantCopies();
  RunReplayableStep(replays, key, record);
  ForgetQuantCopies();
}

void CudaBackend::RunReplayableStep(Replays* replays, uint64_t key, FunctionRef<void()> record) {
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
    c.exec = Instantiate(graph, ProgrammaticLaunch(device_));
    LS_CUDA_CHECK(cudaGraphDestroy(graph));
    c.scratch_generation = scratch_generation_;
  }
  LS_CUDA_CHECK(cudaGraphLaunch(c.exec, stream_));
  ++replays_launched_;
}

}  // namespace lockstep::backend

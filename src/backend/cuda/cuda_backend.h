// The CUDA backend: tensors, weights (in their GGUF block formats) and the KV cache in device
// memory, one stream, batch-invariant kernels (docs/kernels.md states the contract).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

struct CUstream_st;

namespace lockstep::backend::cuda {
struct ActRows;
struct NormQuant;
}  // namespace lockstep::backend::cuda

namespace lockstep::backend {

class CudaBackend : public Backend {
 public:
  // The device `device` (0: the first); an error when there is none or it cannot be used.
  static Expected<std::unique_ptr<CudaBackend>> Create(int device = 0);
  // Uses `device`, which must exist (Create checks that first).
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  // Number of CUDA devices this process can use (0 without a driver or a GPU).
  static int DeviceCount();

  std::string name() const override { return "cuda"; }
  int threads() const override { return 1; }
  std::string device_name() const override { return device_name_; }

  Tensor NewTensor(int64_t rows, int64_t cols) override;
  IntTensor NewIntTensor(int64_t n) override;
  void ToHost(const Tensor& t, std::vector<float>* out) override;
  void FromHost(std::span<const float> src, Tensor* t) override;
  void Upload(std::span<const int32_t> src, IntTensor* t) override;
  void Download(const IntTensor& t, std::span<int32_t> out) override;
  Weight PrepareWeight(Weight host_view) override;
  std::shared_ptr<void> NewBuffer(size_t bytes) override;
  void CopyBytes(void* dst, const void* src, size_t bytes) override;
  // CUDA graphs: a key's ops run plainly the first time (sizing scratch buffers), are captured
  // the second time and replayed from then on; a capture is redone when a scratch buffer it
  // names has been reallocated since.
  std::unique_ptr<Replays> NewReplays() override;
  void RunReplayable(Replays* replays, uint64_t key, FunctionRef<void()> record) override;

  void GetRows(const Weight& table, std::span<const int32_t> ids, float scale, Tensor* y) override;
  void MatMul(const Weight& w, const Tensor& x, Tensor* y) override;
  // Integer-path weights of one activation block length quantize x once between them.
  void MatMuls(const Tensor& x, std::span<const MatMulOut> outs) override;
  void MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                  int64_t ids_per_row, Tensor* y) override;
  void RmsNorm(const Tensor& x, const Weight* w, float eps, int64_t group, float extra_scale,
               Tensor* y) override;
  void Rope(Tensor* x, std::span<const int32_t> pos, int head_dim, int n_rot, float base,
            const Weight* freq_factors) override;
  void RmsNormSumNormAdd(const Tensor& a, const Weight* wa, const Tensor& b, const Weight* wb,
                         const Weight* w, float eps, const Tensor& residual,
                         std::span<Tensor* const, 2> work, Tensor* y) override;
  void RmsNorms(const Tensor& x, float eps, std::span<const NormOut> outs) override;
  void RmsNormAdd(const Tensor& x, const Weight* w, float eps, const Tensor& residual,
                  Tensor* y) override;
  void RmsNormRope(const Tensor& x, const Weight* w, float eps, int head_dim,
                   std::span<const int32_t> pos, int n_rot, float base, const Weight* freq_factors,
                   Tensor* y) override;
  void Add(const Tensor& a, const Tensor& b, Tensor* y) override;
  void ScaleByWeight(const Tensor& a, const Weight& s, Tensor* y) override;
  void Scale(const Tensor& a, float s, Tensor* y) override;
  void Mul(const Tensor& a, const Tensor& b, Tensor* y) override;
  void GeluMul(const Tensor& gate, int64_t gate_col, const Tensor& up, int64_t up_col,
               int64_t width, Tensor* y) override;
  void Gelu(const Tensor& x, Tensor* y) override;
  void Softcap(const Tensor& x, float c, Tensor* y) override;
  void CopyCols(const Tensor& x, int64_t col, int64_t width, Tensor* y) override;
  void GatherRows(const Tensor& x, std::span<const int32_t> rows, Tensor* y) override;
  void CopyRows(const Tensor& x, std::span<const int32_t> src, Tensor* y,
                std::span<const int32_t> dst) override;
  void Concat(const Tensor& a, const Tensor& b, Tensor* y) override;
  void KvWrite(const KvLayerView& kv, const Tensor& k, const Tensor& v,
               const RowInfo& rows) override;
  void Attention(const Tensor& q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                 int window, bool include_self, const RowInfo& rows, Tensor* out) override;
  void SelectTokens(const Tensor& logits, std::span<const SampleRow> rows, IntTensor* ids) override;
  void MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate, const Weight* up,
              const Weight& down, const Weight* down_scale, int n_used, Tensor* y) override;

  // Waits for every queued kernel (tests and benches; ops never need it).
  void Synchronize();
  // Steps replayed from a capture so far (tests and benches check that replays happen).
  int64_t replays_launched() const { return replays_launched_; }
  // Device memory held by weights uploaded so far.
  size_t weight_bytes() const { return weight_bytes_; }
  // Integer matmul inputs taken from a norm's quantized copy instead of quantized by a launch
  // of their own, so far (tests check that the fused path runs).
  int64_t quantized_in_norms() const { return quantized_in_norms_; }

 private:
  std::shared_ptr<void> Allocate(size_t bytes, const char* what);
  // Grow-only device scratch (MoE intermediates, selection indices); reused every step.
  enum ScratchSlot : int {
    kMoeExperts,
    kMoeWeights,
    kMoeHidden,
    kMoeAct,
    kMoeOut,
    kSelectIdx,
    kSelectScratch,
    kActQ,          // quantized activation rows of the integer matmul path
    kMoeTiles,      // expert tile table of the tensor-core MoE matmuls
    kAttnPartials,  // attention's per-split softmax states
    kMmaSplit,      // the second half of a split tensor-core matmul (matmul_mma.h)
    kScratchSlots
  };
  void* Scratch(ScratchSlot slot, size_t bytes);
  // The kActQ scratch for `rows` activation rows of length k against weights of type t (null
  // when the type is not on the integer path).
  void* ActScratch(DType t, int64_t rows, int64_t k);
  // The kMmaSplit scratch for a rows x n_out product of type t where the tensor-core launch
  // splits (SplitsIntMma), else null.
  float* SplitScratch(DType t, int64_t rows, int64_t n_out);
  // Quantized copies of norm outputs (docs/kernels.md, "Norms that quantize their output"): a
  // whole-row norm whose output an integer matmul read before writes, in the same kernel, the
  // activation rows that matmul needs; the matmul then reads them instead of launching the
  // quantization. A copy is current from the norm that made it until anything writes memory
  // overlapping its tensor (every op calls Wrote on its outputs), and never crosses a replayable
  // step's boundary (a replay does not rerun the ops before it).
  struct QuantCopy {
    const float* x = nullptr;  // the norm output (key, with cols)
    int64_t cols = 0;
    int block = 0;  // activation block length its integer matmul reads (0: none seen yet)
    std::shared_ptr<void> buf;
    size_t bytes = 0;
    int64_t rows = -1;  // rows the copy holds; -1: not current
  };
  // The quantized copy a whole-row norm writing `y` should make (block 0: none), sizing its
  // buffer when no capture is in progress.
  cuda::NormQuant NormQuantFor(const Tensor& y);
  // Grows c's buffer to `rows` rows; false when it is smaller and a capture is in progress.
  bool SizeQuantCopy(QuantCopy* c, int64_t rows);
  // After a norm launch with NormQuantFor(y): the copy of y is current.
  void NormQuantMade(const Tensor& y, const cuda::NormQuant& q);
  // x quantized for integer-path weights of type t: the current copy a norm made, else quantized
  // now into the kActQ scratch (and the block noted, so the norm writing x quantizes next time).
  cuda::ActRows IntInput(DType t, const Tensor& x);
  // An op is about to write [p, p + bytes): copies of tensors overlapping it stop being current.
  void Wrote(const void* p, size_t bytes);
  void Wrote(const Tensor& y) {
    Wrote(y.data(), static_cast<size_t>(y.rows() * y.cols()) * sizeof(float));
  }
  void ForgetQuantCopies();
  // RunReplayable between its ForgetQuantCopies calls.
  void RunReplayableStep(Replays* replays, uint64_t key, FunctionRef<void()> record);

  // Queues a host-to-device copy without waiting for the device: `src` is first copied into
  // pinned staging memory, which is reused after the next synchronization (every copy queued
  // before it has landed by then). So a step's inputs cost no host round trip.
  void CopyToDevice(void* dst, const void* src, size_t bytes);

  int device_;
  CUstream_st* stream_ = nullptr;
  std::string device_name_;
  std::vector<std::shared_ptr<void>> weights_;  // device copies of prepared weights
  size_t weight_bytes_ = 0;
  struct ScratchBuffer {
    std::shared_ptr<void> ptr;
    size_t bytes = 0;
  };
  std::vector<ScratchBuffer> scratch_;
  std::shared_ptr<void> staging_;    // pinned host memory of kStagingBytes
  size_t staging_used_ = 0;          // bytes queued since the last synchronization
  bool capturing_ = false;           // inside RunReplayable's capture: only kernels may be queued
  uint64_t scratch_generation_ = 0;  // bumped whenever a scratch buffer moves
  int64_t replays_launched_ = 0;
  std::vector<QuantCopy> quant_copies_;
  int64_t quantized_in_norms_ = 0;
  // Host staging of SelectTokens (grown once, reused).
  std::vector<int32_t> greedy_rows_, greedy_out_, sampled_ids_;
  std::vector<float> sample_logits_;
};

}  // namespace lockstep::backend

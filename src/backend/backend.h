// The backend interface: tensors live in backend memory; the forward pass is written once
// against these ops. Every op computes each output row from that row's own inputs in an order
// fixed by the row alone (batch invariance is part of the contract, not an option).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_view.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/function_ref.h"
#include "sample/sampler.h"

namespace lockstep::quant {
class PackedMatrix;
}

namespace lockstep::backend {

// A 2-D activation [rows, cols] of float32 in backend memory (rows = tokens).
class Tensor {
 public:
  Tensor() = default;
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  float* data() const { return data_; }  // device pointer on device backends
  float* row(int64_t r) const { return data_ + r * cols_; }
  bool empty() const { return data_ == nullptr; }
  int64_t capacity() const { return capacity_; }  // elements the storage holds
  // The same storage seen as [rows, cols] (contiguous, rows * cols <= capacity): activation
  // buffers are allocated once at their largest and viewed at each step's size.
  Tensor View(int64_t rows, int64_t cols) const;

 private:
  friend class Backend;
  std::shared_ptr<void> storage_;
  float* data_ = nullptr;
  int64_t rows_ = 0, cols_ = 0, capacity_ = 0;
};

// A vector of int32 in backend memory (token ids, positions, slots, row indices).
class IntTensor {
 public:
  IntTensor() = default;
  int64_t size() const { return size_; }
  int32_t* data() const { return data_; }  // device pointer on device backends
  std::span<const int32_t> span() const { return {data_, static_cast<size_t>(size_)}; }
  std::span<const int32_t> first(int64_t n) const { return {data_, static_cast<size_t>(n)}; }

 private:
  friend class Backend;
  std::shared_ptr<void> storage_;
  int32_t* data_ = nullptr;
  int64_t size_ = 0;
};

// How the forward pass reads a weight, so a backend may lay matmul weights out for its kernels:
// kMatMul weights are operands of MatMul/MatMuls (and may also be read by row); kRows weights are
// only read row by row (GetRows lookups, MatMulRows); kExperts are MoE expert stacks
// {in, out, n_expert}, read by MoeFfn one expert's rows at a time.
enum class WeightUse { kMatMul, kRows, kExperts };

// A weight tensor as the backend holds it (for the CPU: a view into the mmapped GGUF file, plus
// the CPU kernels' packed copy of a matmul weight or expert stack where its type has one).
struct Weight {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;  // ggml order
  const void* data = nullptr;
  size_t row_bytes = 0;  // bytes per ne[0]-row
  WeightUse use = WeightUse::kMatMul;
  std::shared_ptr<const quant::PackedMatrix> packed;  // the CPU's packed rows, or null
  int64_t n_rows() const;                             // product of ne[1..]
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
  explicit operator bool() const { return data != nullptr; }
};

// Where each row of a batch sits: its sequence slot and absolute position (spans over backend
// memory: the step inputs).
struct RowInfo {
  std::span<const int32_t> pos;
  std::span<const int32_t> seq;
};

// How one output row picks its token: a pure function of (settings, position, logits).
struct SampleRow {
  sample::Settings settings;
  int64_t position = 0;  // absolute position of the token being chosen
  // The tokens before `position` the repeat penalty looks at (newest last; empty when off).
  std::span<const int32_t> recent;
};

// A store of captured op sequences (CUDA graphs), owned by the workspace whose buffers they
// name, so that no capture outlives the addresses it replays. Backends that capture nothing
// return none.
class Replays {
 public:
  virtual ~Replays() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int threads() const = 0;
  // The accelerator's name for run identities (empty: the host CPU runs the ops).
  virtual std::string device_name() const { return {}; }

  // Memory. Contents of a new tensor are unspecified. Allocation happens when a model, a cache
  // or an engine is set up, never inside a step.
  virtual Tensor NewTensor(int64_t rows, int64_t cols) = 0;
  virtual IntTensor NewIntTensor(int64_t n) = 0;
  virtual void ToHost(const Tensor& t, std::vector<float>* out) = 0;
  virtual void FromHost(std::span<const float> src, Tensor* t) = 0;
  // Copies src into the first src.size() elements of t (one upload per step input).
  virtual void Upload(std::span<const int32_t> src, IntTensor* t) = 0;
  // Copies the first out.size() elements of t to the host.
  virtual void Download(const IntTensor& t, std::span<int32_t> out) = 0;
  // Makes a weight usable by ops (a device upload for device backends; a view on the CPU).
  virtual Weight PrepareWeight(Weight host_view) = 0;
  // Raw persistent storage (the KV cache), zeroed; freed when the last owner lets go.
  virtual std::shared_ptr<void> NewBuffer(size_t bytes) = 0;
  // Copies bytes between two buffers of backend memory (copy-on-write of cache blocks).
  virtual void CopyBytes(void* dst, const void* src, size_t bytes) = 0;

  // Replayable steps. `record` queues the ops of one forward pass whose launch shapes and buffer
  // addresses are all fixed by `key` within `replays` (0: never replayed). A device backend may
  // capture them the second time it sees a key and from then on replay the capture instead of
  // calling `record` (same kernels, same arguments: the same bits). So `record` must only queue
  // ops: no uploads, downloads, allocations or host-side results. The CPU calls `record`.
  virtual std::unique_ptr<Replays> NewReplays() { return nullptr; }
  virtual void RunReplayable(Replays* replays, uint64_t key, FunctionRef<void()> record) {
    (void)replays;
    (void)key;
    record();
  }

  // y[r] = table[ids[r]] * scale, rows dequantized to f32.
  virtual void GetRows(const Weight& table, std::span<const int32_t> ids, float scale,
                       Tensor* y) = 0;
  // y[r][j] = dot(x[r], w row j) for a weight {in, out}.
  virtual void MatMul(const Weight& w, const Tensor& x, Tensor* y) = 0;
  // Several matmuls of one input as one op: y_i = x · w_i for each {w_i, y_i}. Every element
  // equals the separate MatMul's bit for bit; a backend may run them as one parallel pass or
  // one launch (fewer synchronisations per decode step).
  struct MatMulOut {
    const Weight* w;
    Tensor* y;
  };
  virtual void MatMuls(const Tensor& x, std::span<const MatMulOut> outs) {
    for (const MatMulOut& o : outs) MatMul(*o.w, x, o.y);
  }
  // Matmul restricted to the listed weight rows: y[r][i] = dot(x[r], w row ids[r][i]).
  virtual void MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                          int64_t ids_per_row, Tensor* y) = 0;
  // RMSNorm over each group of `group` consecutive values: y = x / sqrt(mean(x^2)+eps) * w
  // (w may be null: no weight; w has `group` elements) * extra_scale.
  virtual void RmsNorm(const Tensor& x, const Weight* w, float eps, int64_t group,
                       float extra_scale, Tensor* y) = 0;
  // NEOX RoPE in place on heads of width head_dim: pairs (i, i + n_rot/2) for i < n_rot/2,
  // angle = pos * base^(-2i/n_rot) / freq_factors[i] (freq_factors may be null).
  virtual void Rope(Tensor* x, std::span<const int32_t> pos, int head_dim, int n_rot, float base,
                    const Weight* freq_factors) = 0;
  // Fused pairs the forward pass runs at every layer. The defaults compose the ops above, and a
  // backend that fuses them must give the same bits (the same float operations in the same
  // order, with no intermediate rounding the pair would not do).
  // y = RmsNorm(x) over whole rows with weight w (no extra scale) + residual: a residual
  // connection's norm and sum. y may be x, never the residual.
  virtual void RmsNormAdd(const Tensor& x, const Weight* w, float eps, const Tensor& residual,
                          Tensor* y) {
    CHECKF(y->data() != residual.data(), "rms_norm_add: the output overwrites the residual");
    RmsNorm(x, w, eps, x.cols(), 1.0f, y);
    Add(*y, residual, y);
  }
  // Whole-row RmsNorms of one input with several weights (and extra scales): outs[i].y =
  // RmsNorm(x, outs[i].w, eps, x.cols(), outs[i].extra_scale); no output may be x. A MoE layer
  // normalizes its residual stream three ways (MLP, router, experts).
  struct NormOut {
    const Weight* w;
    float extra_scale;
    Tensor* y;
  };
  virtual void RmsNorms(const Tensor& x, float eps, std::span<const NormOut> outs) {
    for (const NormOut& o : outs) {
      CHECKF(o.y->data() != x.data(), "rms_norms: an output overwrites the input");
      RmsNorm(x, o.w, eps, x.cols(), o.extra_scale, o.y);
    }
  }
  // y = RmsNorm(RmsNorm(a, wa) + RmsNorm(b, wb), w) + residual over whole rows: a MoE layer's
  // shared-MLP and expert outputs, each normalized, summed, normalized again and added to the
  // residual stream. `work` holds two tensors of a's shape for the intermediate rows (the
  // composition's; a fused backend may leave them untouched). y is none of the inputs.
  virtual void RmsNormSumNormAdd(const Tensor& a, const Weight* wa, const Tensor& b,
                                 const Weight* wb, const Weight* w, float eps,
                                 const Tensor& residual, std::span<Tensor* const, 2> work,
                                 Tensor* y) {
    RmsNorm(a, wa, eps, a.cols(), 1.0f, work[0]);
    RmsNormAdd(b, wb, eps, *work[0], work[1]);
    RmsNormAdd(*work[1], w, eps, residual, y);
  }
  // RmsNorm over heads of head_dim (weight w), then NEOX RoPE on them: a query or key
  // projection's per-head norm and rotation. y may be x.
  virtual void RmsNormRope(const Tensor& x, const Weight* w, float eps, int head_dim,
                           std::span<const int32_t> pos, int n_rot, float base,
                           const Weight* freq_factors, Tensor* y) {
    RmsNorm(x, w, eps, head_dim, 1.0f, y);
    Rope(y, pos, head_dim, n_rot, base, freq_factors);
  }
  virtual void Add(const Tensor& a, const Tensor& b, Tensor* y) = 0;
  // y = a * s where s is a scalar held in a 1-element weight (layer_output_scale).
  virtual void ScaleByWeight(const Tensor& a, const Weight& s, Tensor* y) = 0;
  virtual void Scale(const Tensor& a, float s, Tensor* y) = 0;
  virtual void Mul(const Tensor& a, const Tensor& b, Tensor* y) = 0;
  // y = gelu_tanh(gate) * up; gate and up may be column ranges of one tensor.
  virtual void GeluMul(const Tensor& gate, int64_t gate_col, const Tensor& up, int64_t up_col,
                       int64_t width, Tensor* y) = 0;
  virtual void Gelu(const Tensor& x, Tensor* y) = 0;
  // y = c * tanh(x / c).
  virtual void Softcap(const Tensor& x, float c, Tensor* y) = 0;
  // Copies columns [col, col+width) of x into y (views without aliasing).
  virtual void CopyCols(const Tensor& x, int64_t col, int64_t width, Tensor* y) = 0;
  // y[i] = x[rows[i]].
  virtual void GatherRows(const Tensor& x, std::span<const int32_t> rows, Tensor* y) = 0;
  // y[dst[i]] = x[src[i]] for each i (other rows of y are left as they are).
  virtual void CopyRows(const Tensor& x, std::span<const int32_t> src, Tensor* y,
                        std::span<const int32_t> dst) = 0;
  // y = concat(a, b) along columns.
  virtual void Concat(const Tensor& a, const Tensor& b, Tensor* y) = 0;

  // Writes rows of K and V (heads of width head_dim) into the cache layer `kv` at each row's
  // (seq, pos), converted to the cache's element type, before any attention reads them. The
  // caller has made those positions writable (kv::KvCache::PrepareWrite).
  virtual void KvWrite(const KvLayerView& kv, const Tensor& k, const Tensor& v,
                       const RowInfo& rows) = 0;
  // Causal attention of each query row at position p over its own sequence's cached
  // positions in (p - window, p] (window <= 0: from 0), scale 1, GQA head mapping
  // h / (H / Hkv). With include_self false the key at p itself is excluded (a drafter's query
  // at the next position reads only what the target has cached).
  virtual void Attention(const Tensor& q, const KvLayerView& kv, int n_head, int n_head_kv,
                         int head_dim, int window, bool include_self, const RowInfo& rows,
                         Tensor* out) = 0;

  // ids[i] = the token output row i selects under rows[i] (sample::Select: greedy argmax with
  // ties to the lowest id, or counter-based Gumbel-max). Only ids cross to the host.
  virtual void SelectTokens(const Tensor& logits, std::span<const SampleRow> rows,
                            IntTensor* ids) = 0;

  // Mixture of experts (Gemma 4): per row, softmax over router logits, top-k, renormalise,
  // y = sum_e w_e * down_scale[e] * down_e(gelu(gate_e x) * up_e x). With `up` null, `gate`
  // is the fused {in, 2*n_ff_exp, n_expert} tensor with gate rows first. Experts are summed
  // in ascending expert id, so the order does not depend on router ranking ties elsewhere.
  virtual void MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate,
                      const Weight* up, const Weight& down, const Weight* down_scale, int n_used,
                      Tensor* y) = 0;

 protected:
  static Tensor Wrap(std::shared_ptr<void> storage, float* data, int64_t rows, int64_t cols) {
    Tensor t;
    t.storage_ = std::move(storage);
    t.data_ = data;
    t.rows_ = rows;
    t.cols_ = cols;
    t.capacity_ = rows * cols;
    return t;
  }
  static IntTensor WrapInts(std::shared_ptr<void> storage, int32_t* data, int64_t n) {
    IntTensor t;
    t.storage_ = std::move(storage);
    t.data_ = data;
    t.size_ = n;
    return t;
  }
};

inline Tensor Tensor::View(int64_t rows, int64_t cols) const {
  CHECKF(rows >= 0 && cols >= 0 && rows * cols <= capacity_, "view [{}, {}] of a {}-element tensor",
         rows, cols, capacity_);
  Tensor t = *this;
  t.rows_ = rows;
  t.cols_ = cols;
  return t;
}

// The one place that names concrete backends: "cpu" (and "cuda" once it exists).
std::unique_ptr<Backend> Create(std::string_view name, int n_threads);
// Names Create accepts, for --help texts and errors.
std::vector<std::string> Available();

}  // namespace lockstep::backend

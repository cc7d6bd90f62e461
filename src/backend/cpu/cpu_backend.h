// The CPU backend: host memory, a private thread pool, batch-invariant kernels.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/threadpool.h"
#include "quant/quant.h"

namespace lockstep::backend {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int n_threads);
  std::string name() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }

  Tensor NewTensor(int64_t rows, int64_t cols) override;
  IntTensor NewIntTensor(int64_t n) override;
  void ToHost(const Tensor& t, std::vector<float>* out) override;
  void FromHost(std::span<const float> src, Tensor* t) override;
  void Upload(std::span<const int32_t> src, IntTensor* t) override;
  void Download(const IntTensor& t, std::span<int32_t> out) override;
  Weight PrepareWeight(Weight host_view) override;
  std::shared_ptr<void> NewBuffer(size_t bytes) override;
  void CopyBytes(void* dst, const void* src, size_t bytes) override;

  void GetRows(const Weight& table, std::span<const int32_t> ids, float scale, Tensor* y) override;
  void MatMul(const Weight& w, const Tensor& x, Tensor* y) override;
  void MatMuls(const Tensor& x, std::span<const MatMulOut> outs) override;
  void MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                  int64_t ids_per_row, Tensor* y) override;
  void RmsNorm(const Tensor& x, const Weight* w, float eps, int64_t group, float extra_scale,
               Tensor* y) override;
  void Rope(Tensor* x, std::span<const int32_t> pos, int head_dim, int n_rot, float base,
            const Weight* freq_factors) override;
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
  void SelectTokens(const Tensor& logits, std::span<const SampleRow> rows, IntTensor* ids) override;
  void Concat(const Tensor& a, const Tensor& b, Tensor* y) override;
  void KvWrite(const KvLayerView& kv, const Tensor& k, const Tensor& v,
               const RowInfo& rows) override;
  void Attention(const Tensor& q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                 int window, bool include_self, const RowInfo& rows, Tensor* out) override;
  void MoeFfn(const Tensor& x, const Tensor& router_logits, const Weight& gate, const Weight* up,
              const Weight& down, const Weight* down_scale, int n_used, Tensor* y) override;

  ThreadPool& pool() { return pool_; }
  // Quantized weights against several activation rows: the tile kernels (quant::DotTile, the
  // default) or today's row-by-row DotCols path (benchmarks' baseline). Same bits either way.
  // With tiles on, MoeFfn also groups its (row, expert) pairs by expert (one pass over each
  // expert's weights for all its rows); off, it keeps the per-pair path. Same bits either way.
  void set_quant_tiles(bool on) { quant_tiles_ = on; }
  // MoeFfn's grouping alone (on by default; it also needs tiles on): off keeps the per-pair
  // path while the dense matmuls stay on tiles (benchmarks' MoE before/after). Same bits.
  void set_moe_grouped(bool on) { moe_grouped_ = on; }
  // Expert stacks packed at load (the default; set before loading a model): a second copy of
  // the experts for the packed kernels. Off, they are read from the mmapped file. Same bits.
  void set_pack_experts(bool on) { pack_experts_ = on; }

 private:
  // Scratch of one pool worker for the kernels that need more than registers: MoE routing and
  // expert activations, top-k candidates of token selection.
  struct WorkerScratch {
    std::vector<float> probs, act;
    std::vector<int> experts;
    std::vector<int32_t> candidates;
  };
  // MoeFfn's state between its parallel passes, per (row, selected expert) pair ("slot", row
  // major, experts ascending): expert id, combination weight, gate/up outputs, down outputs,
  // prepared rows. The grouped path keeps hid, down, xact and xs by sorted position instead
  // (pairs ordered by expert, then row): `order` maps a position to its slot, `pos` a slot to
  // its position, `start` an expert to its first position, `active` lists the experts in use.
  // Grown, never shrunk.
  struct MoeState {
    std::vector<int> expert, active;
    std::vector<float> weight, hid, down;
    std::vector<int64_t> order, pos, start;
    std::vector<quant::PreparedRow> xin, xact, xs;  // by row, by slot, by position
  };
  // The shapes of one MoeFfn call.
  struct MoeShape {
    int64_t rows, slots, n_embd, n_ff;
    int n_expert, n_used;
  };
  void MoeBuffers(const MoeShape& sh, bool grouped);
  void MoeRoute(const Tensor& x, const Tensor& router_logits, DType in_type, int n_used,
                const float* scale, bool prepare);
  // Expert matmuls one (row, expert) pair at a time, in column chunks (the baseline path).
  void MoePairs(const MoeShape& sh, const Weight& gate, const Weight* up, const Weight& down);
  // Expert matmuls grouped by expert (moe_grouped.cpp).
  void MoeGrouped(const Tensor& x, const MoeShape& sh, const Weight& gate, const Weight* up,
                  const Weight& down);
  // y's rows: the weighted sum of each row's down outputs in ascending expert id (`pos`: the
  // grouped path's slot -> position map; null for the pair path).
  void MoeCombine(const MoeShape& sh, const int64_t* pos, Tensor* y);
  // Prepared activation rows, reused across calls. Every row keeps the largest buffers any
  // row of the set has needed, so a row index first used by a later, larger step (more
  // drafting sequences, more verify rows) finds its buffers ready.
  struct PreparedSet {
    std::vector<quant::PreparedRow> rows;
  };
  // Records the width of a matmul's activations (every call, whichever kernel runs it): every
  // prepared row is reserved for the widest, so a later call that first prepares that width
  // (a single drafting sequence, say) finds the buffers ready.
  void NoteActivationWidth(int64_t cols);
  // x's rows prepared for w's type, in set `set` (MatMuls prepares one set per weight type of
  // its outputs).
  const quant::PreparedRow* PrepareRows(size_t set, const Weight& w, const Tensor& x);

  float* RowsScratch(int worker);
  ThreadPool pool_;
  // Every buffer below is grown on first use and never shrunk, so steady-state decode (the
  // same shapes step after step) allocates nothing. Per-worker scratch is grown either on the
  // calling thread before a parallel pass or by its own worker.
  // Attention scratch per pool worker (scores, accumulator, converted keys and values).
  std::vector<std::vector<float>> attn_scratch_;
  // Attention's row blocks: (first row, rows) of consecutive positions of one sequence.
  std::vector<std::pair<int64_t, int64_t>> attn_blocks_;
  // Attention's work items in running order: (KV head, block, head part).
  struct AttnItem {
    int32_t kv_head, block, part;
  };
  std::vector<AttnItem> attn_items_;
  std::vector<WorkerScratch> worker_;                // by pool worker index
  std::vector<PreparedSet> prepared_;                // prepared activation sets
  int64_t widest_ = 0;                               // widest matmul activation row seen
  std::vector<int64_t> mm_first_;                    // MatMuls: first block of each output
  std::vector<const quant::PreparedRow*> mm_prep_;   // MatMuls: each output's prepared rows
  std::vector<DType> mm_types_;                      // MatMuls: weight type of each set
  std::vector<float> rope_ff_, norm_w_, moe_scale_;  // weights read as f32
  MoeState moe_;
  std::vector<double> rope_inv_freq_;
  // RoPE's cos and sin of the last few distinct (positions, rotation) pairs: a step's Q and K
  // of every layer with the same base and frequency factors rotate by the same angles.
  struct RopeAngles {
    std::vector<int32_t> pos;
    int n_rot = 0;
    float base = 0.0f;
    std::vector<float> freq_factors;  // the first n_rot / 2 (empty: none)
    std::vector<float> cos_sin;       // [rows][n_rot / 2] pairs (cos, sin)
  };
  const float* RopeTable(std::span<const int32_t> pos, int n_rot, float base,
                         const Weight* freq_factors);
  std::array<RopeAngles, 2> rope_angles_;
  size_t rope_angles_next_ = 0;
  // Lane accumulators of the multi-row float matmul, kRowsScratchFloats per pool worker: fixed
  // size (rows beyond one chunk are done in passes), so it is allocated once, here.
  std::vector<float> rows_scratch_;
  bool quant_tiles_ = true;
  bool pack_experts_ = true;
  bool moe_grouped_ = true;
};

// Scalar kernels shared by several ops; each is a pure function of its arguments.
void RmsNormRow(const float* x, const float* w, float eps, int64_t n, float extra_scale, float* y);
// Weight rows of any dtype as f32 (norm weights and small vectors).
void WeightRowF32(const Weight& w, int64_t row, float* out);

}  // namespace lockstep::backend

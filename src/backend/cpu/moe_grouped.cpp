// Grouped expert GEMM for MoeFfn: the (row, expert) pairs sorted by expert, and each expert's
// gate/up and down rows computed for all of its rows in one pass (prefill and verify batches
// read each selected expert's weights once instead of once per row). Every output element is
// still one dot product equal to DotRow's bits, so the result matches the pair-at-a-time path
// for any row count.
#include <algorithm>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/cpu_backend.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace lockstep::backend {
namespace {

// Output columns per task: one packed group.
constexpr int64_t kCols = quant::kPackedCols;
static_assert(kCols <= quant::kMaxTileCols);

// Activation rows per kernel call whose prepared form (about 1.14 bytes per element) fills about
// 1 MiB of L2, a multiple of 16 (as the dense matmuls pass them): an expert picked by most of a
// long prompt's rows keeps its activations cached while its column blocks go over them.
int64_t RowPass(int64_t k) {
  return std::max<int64_t>(16, (int64_t{1} << 20) / (k + k / 7) / 16 * 16);
}

// out[r * stride + c] = DotRow(w.row(first + c), x[r]) for c < n_cols and r < n: the packed
// kernels where the stack is packed (`first` is then a multiple of 16), the tile kernels for
// enough rows, else a few weight rows at a time against each row (reused from L1 across them).
void ExpertBlock(const Weight& w, int64_t first, int n_cols, const quant::PreparedRow* x, int64_t n,
                 float* out, int64_t stride) {
  const int64_t pass = RowPass(w.ne[0]);
  if (w.packed) {
    for (int64_t r0 = 0; r0 < n; r0 += pass)
      quant::DotPacked(*w.packed, first / kCols, n_cols, x + r0, std::min(pass, n - r0),
                       out + r0 * stride, stride);
    return;
  }
  if (n >= quant::MinDotTileRows() && quant::HasDotTile(w.type)) {
    for (int64_t r0 = 0; r0 < n; r0 += pass)
      quant::DotTile(w.row(first), w.row_bytes, n_cols, x + r0, std::min(pass, n - r0),
                     out + r0 * stride, stride);
    return;
  }
  // One row streams its expert from memory, which some levels read faster a row a call.
  const int group = n == 1 ? quant::StreamedDotCols() : quant::kMaxDotCols;
  const void* ws[quant::kMaxDotCols];
  float o[quant::kMaxDotCols];
  for (int c0 = 0; c0 < n_cols; c0 += group) {
    const int nc = std::min(group, n_cols - c0);
    for (int c = 0; c < nc; ++c) ws[c] = w.row(first + c0 + c);
    for (int64_t r = 0; r < n; ++r) {
      quant::DotCols(ws, nc, x[r], o);
      for (int c = 0; c < nc; ++c) out[r * stride + c0 + c] = o[c];
    }
  }
}

// One expert matrix pass: `part` p covers column blocks [first_block[p], first_block[p + 1]) of
// every active expert; its expert e's rows start at e * rows_per_expert[p], and output column j
// of the part lands in column col[p] + j of the expert's output rows.
struct Parts {
  const Weight* w[2];
  int64_t rows_per_expert[2], col[2], first_block[3];
  int n = 0;
  void Add(const Weight* weight, int64_t rows, int64_t out_col) {
    w[n] = weight;
    rows_per_expert[n] = rows;
    col[n] = out_col;
    first_block[0] = 0;
    first_block[n + 1] = first_block[n] + (rows + kCols - 1) / kCols;
    ++n;
  }
  int64_t blocks() const { return first_block[n]; }
};

// Sorts the slots by expert (rows ascending within an expert): start[e] is expert e's first
// position, order[i] the slot at position i, pos[s] the position of slot s, `active` the experts
// with at least one row. The order only decides which rows share a kernel call; no result
// depends on it.
void SortByExpert(int n_expert, int64_t slots, const int* expert, int64_t* start, int64_t* order,
                  int64_t* pos, std::vector<int>* active) {
  std::fill(start, start + n_expert + 1, 0);
  for (int64_t s = 0; s < slots; ++s) ++start[expert[s] + 1];
  active->clear();
  for (int e = 0; e < n_expert; ++e) {
    if (start[e + 1] > 0) active->push_back(e);
    start[e + 1] += start[e];
  }
  // start[e] serves as expert e's cursor, then shifts back to its first position.
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t i = start[expert[s]]++;
    order[i] = s;
    pos[s] = i;
  }
  for (int e = n_expert; e > 0; --e) start[e] = start[e - 1];
  start[0] = 0;
}

// Every active expert's rows of one matrix pass against its activation rows (x and out by
// position; out rows of out_cols floats, k the matrices' input width). Tasks are (expert, column
// block) with an expert's blocks adjacent, so a thread's run of tasks reuses its rows from cache.
void ExpertPass(ThreadPool& pool, const Parts& parts, const std::vector<int>& active,
                const int64_t* start, int64_t slots, const quant::PreparedRow* x, float* out,
                int64_t out_cols, int64_t k) {
  const int64_t blocks = parts.blocks(), n_active = static_cast<int64_t>(active.size());
  // At least ~64K multiply-adds a chunk (the split never changes results).
  const int64_t per_task = kCols * k * std::max<int64_t>(1, slots / std::max<int64_t>(1, n_active));
  pool.ParallelFor(n_active * blocks, std::max<int64_t>(1, (1 << 16) / per_task),
                   [&](int64_t b, int64_t e) {
                     for (int64_t t = b; t < e; ++t) {
                       const int ex = active[static_cast<size_t>(t / blocks)];
                       const int64_t blk = t % blocks;
                       int p = 0;
                       while (blk >= parts.first_block[p + 1]) ++p;
                       const int64_t j0 = (blk - parts.first_block[p]) * kCols;
                       const int64_t rows = parts.rows_per_expert[p];
                       const int nc = static_cast<int>(std::min(kCols, rows - j0));
                       const int64_t i0 = start[ex], n = start[ex + 1] - i0;
                       ExpertBlock(*parts.w[p], ex * rows + j0, nc, x + i0, n,
                                   out + i0 * out_cols + parts.col[p] + j0, out_cols);
                     }
                   });
}

}  // namespace

void CpuBackend::MoeGrouped(const Tensor& x, const MoeShape& sh, const Weight& gate,
                            const Weight* up, const Weight& down) {
  const int64_t n_ff = sh.n_ff, n_embd = sh.n_embd, slots = sh.slots;
  const int n_used = sh.n_used;
  SortByExpert(sh.n_expert, slots, moe_.expert.data(), moe_.start.data(), moe_.order.data(),
               moe_.pos.data(), &moe_.active);
  // Each pair's input prepared at its position, so every expert's rows are contiguous.
  const int64_t* order = moe_.order.data();
  pool_.ParallelFor(slots, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      quant::PrepareRow(gate.type, x.row(order[i] / n_used), n_embd, &moe_.xs[i]);
  });
  // Gate and up outputs side by side in each position's hid row (gate first), as the fused
  // stack lays its rows out.
  Parts gate_up;
  if (up) {
    gate_up.Add(&gate, n_ff, 0);
    gate_up.Add(up, n_ff, n_ff);
  } else {
    gate_up.Add(&gate, 2 * n_ff, 0);
  }
  ExpertPass(pool_, gate_up, moe_.active, moe_.start.data(), slots, moe_.xs.data(), moe_.hid.data(),
             2 * n_ff, n_embd);
  // The GELU product of each position, prepared for its down rows.
  pool_.ParallelForWorker(slots, std::max<int64_t>(1, (1 << 12) / n_ff),
                          [&](int worker, int64_t b, int64_t e) {
                            float* act = worker_[static_cast<size_t>(worker)].act.data();
                            for (int64_t i = b; i < e; ++i) {
                              const float* hid = moe_.hid.data() + i * 2 * n_ff;
                              GeluMulRow(hid, hid + n_ff, act, n_ff);
                              quant::PrepareRow(down.type, act, n_ff, &moe_.xact[i]);
                            }
                          });
  Parts down_part;
  down_part.Add(&down, n_embd, 0);
  ExpertPass(pool_, down_part, moe_.active, moe_.start.data(), slots, moe_.xact.data(),
             moe_.down.data(), n_embd, n_ff);
}

}  // namespace lockstep::backend

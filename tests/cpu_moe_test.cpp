// The CPU MoE FFN (backend/cpu/moe.cpp, moe_grouped.cpp) must give every row the same bits
// whatever batch it is in: a batch of 1-20, 33 or 64 rows (pairs grouped by expert, each
// expert's rows through the packed, tile or few-rows kernels) equals the same rows one at a time,
// the per-pair baseline path and a scalar DotRow reference, on 1-3 threads, for packed
// (Q4_K, Q6_K, Q8_0) and other (Q5_0, F16) expert types, fused and separate gate/up, with a
// down scale; and the comparison must notice two swapped experts and a one-ulp change.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/activation_rows.h"
#include "backend/cpu/cpu_backend.h"
#include "quant/packed.h"
#include "quant/quant.h"
#include "testing/quant_weights.h"
#include "testing/random.h"

namespace lockstep {
namespace {

constexpr int kExperts = 12, kUsed = 4;
constexpr int64_t kMaxRows = 64;
const int64_t kRowCounts[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                              12, 13, 14, 15, 16, 17, 18, 19, 20, 33, 64};

struct MoeCase {
  const char* name;
  DType t, down_t;
  int64_t n_embd, n_ff;
  bool fused, pack = true;
};

// Random expert stacks of one case: gate (fused {n_embd, 2 n_ff, E} or {n_embd, n_ff, E}), up,
// down {n_ff, n_embd, E}, the F32 down scale {E}.
struct MoeWeights {
  MoeCase c;
  std::vector<uint8_t> gate, up, down, scale;
};

MoeWeights MakeWeights(const MoeCase& c) {
  MoeWeights w{c, {}, {}, {}, {}};
  const int64_t gate_rows = (c.fused ? 2 : 1) * c.n_ff;
  w.gate = testing::RandomMatrix(c.t, gate_rows * kExperts, c.n_embd, 11);
  if (!c.fused) w.up = testing::RandomMatrix(c.t, c.n_ff * kExperts, c.n_embd, 5011);
  w.down = testing::RandomMatrix(c.down_t, c.n_embd * kExperts, c.n_ff, 9011);
  const auto s = testing::GaussianRow(kExperts, 77);
  w.scale.resize(kExperts * sizeof(float));
  for (int e = 0; e < kExperts; ++e) {
    const float v = 0.5f + std::fabs(s[e]);
    std::memcpy(w.scale.data() + e * sizeof(float), &v, sizeof(float));
  }
  return w;
}

backend::Weight Stack(DType t, std::vector<int64_t> ne, const std::vector<uint8_t>& bytes,
                      backend::WeightUse use = backend::WeightUse::kExperts) {
  backend::Weight w;
  w.name = "experts";
  w.type = t;
  w.row_bytes = RowBytes(t, ne[0]);
  w.ne = std::move(ne);
  w.data = bytes.data();
  w.use = use;
  return w;
}

// The weights as one backend holds them (packed at PrepareWeight where the case packs).
struct BoundMoe {
  backend::Weight gate, up, down, scale;
};

BoundMoe Bind(backend::CpuBackend& be, const MoeWeights& w) {
  const MoeCase& c = w.c;
  be.set_pack_experts(c.pack);
  BoundMoe b;
  b.gate = be.PrepareWeight(Stack(c.t, {c.n_embd, (c.fused ? 2 : 1) * c.n_ff, kExperts}, w.gate));
  if (!c.fused) b.up = be.PrepareWeight(Stack(c.t, {c.n_embd, c.n_ff, kExperts}, w.up));
  b.down = be.PrepareWeight(Stack(c.down_t, {c.n_ff, c.n_embd, kExperts}, w.down));
  b.scale = be.PrepareWeight(Stack(DType::F32, {kExperts}, w.scale, backend::WeightUse::kRows));
  return b;
}

// MoeFfn of `rows` rows of x (n_embd wide) and router logits (kExperts wide) in one call.
std::vector<float> RunMoe(backend::CpuBackend& be, const BoundMoe& b, const std::vector<float>& x,
                          const std::vector<float>& logits, int64_t row0, int64_t rows) {
  const int64_t n_embd = b.gate.ne[0];
  backend::Tensor xt = be.NewTensor(rows, n_embd), lt = be.NewTensor(rows, kExperts),
                  yt = be.NewTensor(rows, n_embd);
  be.FromHost({x.data() + row0 * n_embd, static_cast<size_t>(rows * n_embd)}, &xt);
  be.FromHost({logits.data() + row0 * kExperts, static_cast<size_t>(rows * kExperts)}, &lt);
  be.MoeFfn(xt, lt, b.gate, b.up ? &b.up : nullptr, b.down, &b.scale, kUsed, &yt);
  std::vector<float> y;
  be.ToHost(yt, &y);
  return y;
}

// The scalar reference of one row: softmax, top-k (the logits have no ties), renormalise and
// scale, then per selected expert in ascending id DotRow of each gate/up row, the GELU product,
// DotRow of each down row, summed with the routing weights.
void ReferenceRow(const MoeWeights& w, const float* x, const float* lg, float* y) {
  const MoeCase& c = w.c;
  const float mx = *std::max_element(lg, lg + kExperts);
  std::vector<float> p(kExperts);
  float sum = 0.0f;
  for (int i = 0; i < kExperts; ++i) sum += (p[i] = std::exp(lg[i] - mx));
  for (float& v : p) v /= sum;
  std::vector<int> idx(kExperts);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
  idx.resize(kUsed);
  std::sort(idx.begin(), idx.end());
  float wsum = 0.0f;
  for (int e : idx) wsum += p[e];
  quant::PreparedRow xin, xact;
  quant::PrepareRow(c.t, x, c.n_embd, &xin);
  const size_t gate_rb = RowBytes(c.t, c.n_embd), down_rb = RowBytes(c.down_t, c.n_ff);
  std::vector<float> g(c.n_ff), u(c.n_ff), act(c.n_ff);
  std::fill(y, y + c.n_embd, 0.0f);
  for (int e : idx) {
    float scale;
    std::memcpy(&scale, w.scale.data() + e * sizeof(float), sizeof(float));
    const float we = p[e] / wsum * scale;
    for (int64_t j = 0; j < c.n_ff; ++j) {
      const int64_t gr = (c.fused ? 2 * c.n_ff : c.n_ff) * e + j;
      g[j] = quant::DotRow(w.gate.data() + gr * gate_rb, xin);
      u[j] = c.fused ? quant::DotRow(w.gate.data() + (gr + c.n_ff) * gate_rb, xin)
                     : quant::DotRow(w.up.data() + (c.n_ff * e + j) * gate_rb, xin);
    }
    backend::GeluMulRow(g.data(), u.data(), act.data(), c.n_ff);
    quant::PrepareRow(c.down_t, act.data(), c.n_ff, &xact);
    for (int64_t j = 0; j < c.n_embd; ++j)
      y[j] += we * quant::DotRow(w.down.data() + (c.n_embd * e + j) * down_rb, xact);
  }
}

std::vector<float> Reference(const MoeWeights& w, const std::vector<float>& x,
                             const std::vector<float>& logits) {
  std::vector<float> y(static_cast<size_t>(kMaxRows * w.c.n_embd));
  for (int64_t r = 0; r < kMaxRows; ++r)
    ReferenceRow(w, x.data() + r * w.c.n_embd, logits.data() + r * kExperts,
                 y.data() + r * w.c.n_embd);
  return y;
}

std::vector<float> Prefix(const std::vector<float>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

const MoeCase kCases[] = {
    {"Q4_K fused", DType::Q4_K, DType::Q4_K, 256, 256, true},
    {"Q4_K fused, not packed", DType::Q4_K, DType::Q4_K, 256, 256, true, false},
    {"Q6_K separate", DType::Q6_K, DType::Q6_K, 256, 256, false},
    {"Q8_0 fused", DType::Q8_0, DType::Q8_0, 64, 96, true},
    {"Q4_K gate/up, Q5_0 down (26B-A4B's mix)", DType::Q4_K, DType::Q5_0, 256, 96, true},
    {"Q5_0 separate", DType::Q5_0, DType::Q5_0, 64, 96, false},
    {"F16 fused, 40-row experts", DType::F16, DType::F16, 48, 40, true},
    {"F16 separate, 40-row experts", DType::F16, DType::F16, 48, 40, false},
};

TEST(CpuMoe, BatchesEqualRowAtATimeAndDotRow) {
  for (const MoeCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const MoeWeights w = MakeWeights(c);
    const auto x = testing::GaussianRow(kMaxRows * c.n_embd, 3);
    const auto logits = testing::GaussianRow(kMaxRows * kExperts, 4, 2.0f);
    const auto want = Reference(w, x, logits);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      backend::CpuBackend be(threads);
      const BoundMoe b = Bind(be, w);
      const bool packable = quant::CanPack(c.t) && c.pack;
      EXPECT_EQ(b.gate.packed != nullptr, packable);
      std::vector<float> one_at_a_time;
      for (int64_t r = 0; r < kMaxRows; ++r) {
        const auto y = RunMoe(be, b, x, logits, r, 1);
        one_at_a_time.insert(one_at_a_time.end(), y.begin(), y.end());
      }
      EXPECT_EQ(testing::CountDifferingBits(one_at_a_time, want), 0) << "one row a call";
      for (int64_t rows : kRowCounts) {
        const size_t n = static_cast<size_t>(rows * c.n_embd);
        const auto batch = RunMoe(be, b, x, logits, 0, rows);
        EXPECT_EQ(testing::CountDifferingBits(batch, Prefix(want, n)), 0) << rows << " rows";
        be.set_quant_tiles(false);  // the per-pair baseline path
        const auto pairs = RunMoe(be, b, x, logits, 0, rows);
        be.set_quant_tiles(true);
        EXPECT_EQ(testing::CountDifferingBits(pairs, Prefix(want, n)), 0) << rows << " rows, pairs";
      }
    }
  }
}

// Swapping two experts' down rows (both selected by some row) changes outputs, and a one-ulp
// change of a single output element is counted: the comparison above would catch either.
TEST(CpuMoe, NegativeControlSwappedExpertsAndOneUlpDiffer) {
  const MoeCase c = kCases[0];
  MoeWeights w = MakeWeights(c);
  const auto x = testing::GaussianRow(kMaxRows * c.n_embd, 3);
  const auto logits = testing::GaussianRow(kMaxRows * kExperts, 4, 2.0f);
  const auto want = Reference(w, x, logits);
  backend::CpuBackend be(2);
  {
    const BoundMoe b = Bind(be, w);
    const auto got = RunMoe(be, b, x, logits, 0, kMaxRows);
    ASSERT_EQ(testing::CountDifferingBits(got, want), 0);
    auto bumped = got;
    bumped[5] = std::nextafter(bumped[5], 1e30f);
    EXPECT_EQ(testing::CountDifferingBits(bumped, want), 1);
  }
  const size_t expert_bytes = static_cast<size_t>(c.n_embd) * RowBytes(c.down_t, c.n_ff);
  std::swap_ranges(w.down.begin(), w.down.begin() + static_cast<std::ptrdiff_t>(expert_bytes),
                   w.down.begin() + static_cast<std::ptrdiff_t>(expert_bytes));
  const BoundMoe b = Bind(be, w);  // packs the swapped stack
  const auto swapped = RunMoe(be, b, x, logits, 0, kMaxRows);
  EXPECT_GT(testing::CountDifferingBits(swapped, want), 0);
  EXPECT_EQ(testing::CountDifferingBits(swapped, Reference(w, x, logits)), 0);
}

}  // namespace
}  // namespace lockstep

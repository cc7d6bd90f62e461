// The multi-row (tile) kernels for quantized weights, quant::DotTile, must equal the one-row
// kernel (DotRow, and the portable kernels) bit for bit at every instruction-set level the CPU
// has, for any row count, column count, block count and thread count; the same comparison must
// catch a different accumulation order (negative control).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/quant.h"
#include "testing/matmul_reference.h"
#include "testing/quant_weights.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

const DType kTileTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_XS,
                            DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4};

// out[r * cols + c] by the one-row portable kernel, checked against DotRow on the way.
std::vector<float> OneRow(const std::vector<uint8_t>& w, int cols,
                          const std::vector<PreparedRow>& x) {
  const size_t row_bytes = w.size() / cols;
  std::vector<float> y(x.size() * cols);
  for (size_t r = 0; r < x.size(); ++r)
    for (int c = 0; c < cols; ++c) {
      const void* wc = w.data() + c * row_bytes;
      DotColsIsa(Isa::kPortable, &wc, 1, x[r], &y[r * cols + c]);
      EXPECT_EQ(testing::FloatBits(DotRow(wc, x[r])), testing::FloatBits(y[r * cols + c]));
    }
  return y;
}

std::vector<float> Tiled(Isa isa, const std::vector<uint8_t>& w, int cols,
                         const std::vector<PreparedRow>& x) {
  std::vector<float> y(x.size() * cols);
  DotTileIsa(isa, w.data(), w.size() / cols, cols, x.data(), static_cast<int64_t>(x.size()),
             y.data(), cols);
  return y;
}

class QuantTileIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!CpuHasIsa(GetParam()))
      GTEST_SKIP() << "this CPU lacks " << IsaName(GetParam()) << ": its tile kernels are not run";
  }
};

// 1-20, 33, 47 and 64 rows; every column count 1-16 on short rows; 1, 3, 9 and 17 blocks
// (Acc8's eight partials wrap, and partial groups of four columns).
TEST_P(QuantTileIsa, EqualsOneRowKernelBitForBit) {
  std::vector<int64_t> row_counts = {33, 47, 64};
  for (int64_t r = 1; r <= 20; ++r) row_counts.push_back(r);
  for (DType t : kTileTypes) {
    SCOPED_TRACE(std::string(Name(t)));
    ASSERT_TRUE(HasDotTileIsa(GetParam(), t));
    const int64_t block = Info(t).block_size;
    for (int64_t blocks : {1, 3, 9, 17}) {
      const int64_t n = block * blocks;
      const int cols = blocks == 9 ? 16 : 7;
      const auto w = testing::RandomMatrix(t, cols, n, static_cast<uint32_t>(10 * blocks));
      for (int64_t rows : row_counts) {
        const auto x = testing::PreparedRows(t, rows, n, static_cast<uint32_t>(1000 + rows));
        EXPECT_EQ(testing::CountDifferingBits(Tiled(GetParam(), w, cols, x), OneRow(w, cols, x)), 0)
            << "n=" << n << " rows=" << rows << " cols=" << cols;
      }
    }
    const auto w = testing::RandomMatrix(t, kMaxTileCols, 2 * block, 77);
    const auto x = testing::PreparedRows(t, 9, 2 * block, 78);
    for (int cols = 1; cols <= kMaxTileCols; ++cols) {
      const std::vector<uint8_t> wc(w.begin(), w.begin() + cols * RowBytes(t, 2 * block));
      EXPECT_EQ(testing::CountDifferingBits(Tiled(GetParam(), wc, cols, x), OneRow(wc, cols, x)), 0)
          << "cols=" << cols;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantTileIsa, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& level) { return std::string(IsaName(level.param)); });

// Whole matmuls through the CPU backend (column blocks split over 1-3 threads, MatMuls laying
// weights end to end, rows in several L2-sized passes for the 8192-wide case) equal the same
// matmul one activation row at a time, with the tiles on and off.
TEST(QuantTile, BackendMatMulEqualsOneRowAtATime) {
  if (!HasDotTile(DType::Q4_K)) GTEST_SKIP() << "no tile kernels on this CPU (needs AVX2)";
  constexpr int64_t kCols = 37;  // not a multiple of the 16-column block or 4-column group
  struct Case {
    DType t;
    int64_t n;
    std::vector<int64_t> rows;
  };
  const Case cases[] = {{DType::Q4_K, 768, {2, 5, 9, 17, 64}},
                        {DType::Q6_K, 768, {2, 5, 9, 17, 64}},
                        {DType::Q8_0, 288, {2, 5, 9, 17, 64}},
                        {DType::Q4_K, 8192, {129}}};
  for (const Case& k : cases) {
    const DType t = k.t;
    const int64_t n = k.n;
    const auto wbytes = testing::RandomMatrix(t, kCols, n, 5);
    const backend::Weight w = testing::HostWeight(t, n, kCols, wbytes);
    for (int threads : {1, 2, 3}) {
      backend::CpuBackend be(threads);
      for (int64_t rows : k.rows) {
        const auto xh = testing::GaussianRow(rows * n, static_cast<uint32_t>(rows));
        backend::Tensor x = be.NewTensor(rows, n), y = be.NewTensor(rows, kCols),
                        y2 = be.NewTensor(rows, kCols), y3 = be.NewTensor(rows, kCols);
        be.FromHost(xh, &x);
        be.MatMul(w, x, &y);
        const backend::Backend::MatMulOut outs[] = {{&w, &y2}};
        be.MatMuls(x, outs);
        be.set_quant_tiles(false);
        be.MatMul(w, x, &y3);
        be.set_quant_tiles(true);
        std::vector<float> got, got2, got3;
        be.ToHost(y, &got);
        be.ToHost(y2, &got2);
        be.ToHost(y3, &got3);
        const auto want = testing::MatMulRowByRow(be, w, xh, rows, n);
        EXPECT_EQ(testing::CountDifferingBits(got, want), 0)
            << Name(t) << " n=" << n << " threads=" << threads << " rows=" << rows;
        EXPECT_EQ(testing::CountDifferingBits(got2, want), 0) << "MatMuls " << Name(t);
        EXPECT_EQ(testing::CountDifferingBits(got3, want), 0) << "row by row " << Name(t);
      }
    }
  }
}

// Each block's float term is DotRow of that one block (Acc8 with one block adds it to zeros).
// Added in Acc8's order they give the tile's bits; a left-to-right sum, or Acc8 over the blocks
// in reverse, is caught by the same comparison.
TEST(QuantTile, NegativeControlOtherOrderDiffers) {
  if (!HasDotTile(DType::Q4_K)) GTEST_SKIP() << "no tile kernels on this CPU (needs AVX2)";
  for (DType t : {DType::Q4_K, DType::Q8_0}) {
    const int64_t block = Info(t).block_size, blocks = 24, n = block * blocks, rows = 9;
    const int cols = 8;
    const auto w = testing::RandomMatrix(t, cols, n, 31);
    std::vector<float> xs;
    for (int64_t r = 0; r < rows; ++r) {
      const auto x = testing::GaussianRow(n, static_cast<uint32_t>(40 + r));
      xs.insert(xs.end(), x.begin(), x.end());
    }
    std::vector<PreparedRow> px(rows);
    for (int64_t r = 0; r < rows; ++r) PrepareRow(t, xs.data() + r * n, n, &px[r]);
    const auto got = Tiled(CpuIsa(), w, cols, px);
    std::vector<float> acc8(got.size()), seq(got.size()), reversed(got.size());
    PreparedRow one_block;
    for (int64_t r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        std::vector<float> term(static_cast<size_t>(blocks));
        for (int64_t b = 0; b < blocks; ++b) {
          PrepareRow(t, xs.data() + r * n + b * block, block, &one_block);
          term[b] = DotRow(w.data() + c * RowBytes(t, n) + b * RowBytes(t, block), one_block);
        }
        float lanes[8] = {}, back[8] = {}, s = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          lanes[b % 8] += term[b];
          back[b % 8] += term[blocks - 1 - b];
          s += term[b];
        }
        auto tree = [](const float* a) {
          return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        };
        acc8[r * cols + c] = tree(lanes);
        reversed[r * cols + c] = tree(back);
        seq[r * cols + c] = s;
      }
    EXPECT_EQ(testing::CountDifferingBits(got, acc8), 0) << Name(t) << ": Acc8 of the block terms";
    EXPECT_GT(testing::CountDifferingBits(got, seq), 0)
        << Name(t) << ": a sequential sum never differed";
    EXPECT_GT(testing::CountDifferingBits(got, reversed), 0)
        << Name(t) << ": reversed blocks never differed";
  }
}

}  // namespace
}  // namespace lockstep::quant

// The CPU matmul's blocked multi-row float kernel must equal quant::DotRow bit for bit for every
// row count, column count, length (tails and partial tiles included) and thread count; a
// different summation order or a fused multiply-add must not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_rows.h"
#include "quant/quant.h"
#include "sample/sampler.h"
#include "testing/matmul_reference.h"
#include "testing/random.h"

namespace lockstep {
namespace {

using backend::kRowsScratchFloats;

std::vector<float> Random(uint64_t seed, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(sample::UniformAt(seed, 0, i) * 2 - 1);
  return v;
}

// `cols` weight rows of `n` elements of type t, stored back to back.
std::vector<uint8_t> Weights(DType t, int64_t cols, int64_t n, uint64_t seed) {
  const auto wf = Random(seed, cols * n);
  std::vector<uint8_t> w(RowBytes(t, n) * cols);
  for (int64_t c = 0; c < cols; ++c)
    quant::QuantizeRow(t, wf.data() + c * n, w.data() + c * RowBytes(t, n), n);
  return w;
}

// y[r][c] by the single-row path: DotRow on a prepared activation row.
std::vector<float> Reference(DType t, const std::vector<uint8_t>& w, int64_t cols,
                             const std::vector<float>& x, int64_t rows, int64_t n) {
  std::vector<float> y(static_cast<size_t>(rows * cols));
  quant::PreparedRow p;
  for (int64_t r = 0; r < rows; ++r) {
    quant::PrepareRow(t, x.data() + r * n, n, &p);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = quant::DotRow(w.data() + c * RowBytes(t, n), p);
  }
  return y;
}

std::vector<float> Blocked(DType t, const std::vector<uint8_t>& w, int cols,
                           const std::vector<float>& x, int64_t rows, int64_t n,
                           backend::RowsIsa isa) {
  std::vector<float> y(static_cast<size_t>(rows * cols)), scratch(kRowsScratchFloats);
  backend::RowsBlock b;
  b.type = t;
  b.w = w.data();
  b.row_bytes = RowBytes(t, n);
  b.n_cols = cols;
  b.x = x.data();
  b.n_rows = rows;
  b.n = n;
  b.y = y.data();
  b.y_stride = cols;
  b.prefetch_next = true;  // past the end of the block: a prefetch never faults
  backend::MatMulRowsBlockWith(isa, b, scratch.data());
  return y;
}

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16};
// Every kernel this CPU can run is checked, not only the one MatMulRowsBlock picks.
constexpr backend::RowsIsa kIsas[] = {backend::RowsIsa::kAvx2, backend::RowsIsa::kAvx512};

TEST(MatMulRows, BlockEqualsDotRowBitForBit) {
  if (!backend::HasRowsKernel(DType::F32)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<int64_t> row_counts = {64, 129};
  for (int64_t r = 1; r <= 20; ++r) row_counts.push_back(r);
  for (backend::RowsIsa isa : kIsas) {
    if (!backend::HasRowsIsa(isa)) continue;
    for (DType t : kTypes)
      for (int64_t n : {7, 8, 9, 255, 256, 257, 1536, 6147}) {
        const int cols = n > 2000 ? 5 : 13;  // not a multiple of the 2- or 4-column microkernels
        const auto w = Weights(t, cols, n, 7 + n);
        for (int64_t rows : row_counts) {
          const auto x = Random(1000 + rows, rows * n);
          EXPECT_EQ(testing::CountDifferingBits(Blocked(t, w, cols, x, rows, n, isa),
                                                Reference(t, w, cols, x, rows, n)),
                    0)
              << Name(t) << " n=" << n << " rows=" << rows << " isa=" << static_cast<int>(isa);
        }
      }
  }
}

TEST(MatMulRows, EveryColumnCountBitForBit) {
  if (!backend::HasRowsKernel(DType::F32)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (backend::RowsIsa isa : kIsas) {
    if (!backend::HasRowsIsa(isa)) continue;
    for (DType t : kTypes)
      for (int64_t n : {9, 257})
        for (int cols = 1; cols <= backend::kRowsMaxCols; ++cols) {
          const auto w = Weights(t, cols, n, 3 + cols);
          for (int64_t rows = 1; rows <= 9; ++rows) {
            const auto x = Random(50 + rows, rows * n);
            EXPECT_EQ(testing::CountDifferingBits(Blocked(t, w, cols, x, rows, n, isa),
                                                  Reference(t, w, cols, x, rows, n)),
                      0)
                << Name(t) << " n=" << n << " cols=" << cols << " rows=" << rows
                << " isa=" << static_cast<int>(isa);
          }
        }
  }
}

// Whole matmuls through the backend (column blocks split over threads, MatMuls laying several
// weights end to end) equal the same matmul done one activation row at a time.
TEST(MatMulRows, BackendMatMulEqualsOneRowAtATime) {
  constexpr int64_t kCols = 37;  // not a multiple of the 16-column block
  for (int threads : {1, 2, 3}) {
    backend::CpuBackend be(threads);
    for (DType t : kTypes)
      for (int64_t n : {9, 257, 1536}) {
        const auto wbytes = Weights(t, kCols, n, 11 + n);
        const backend::Weight w = testing::HostWeight(t, n, kCols, wbytes);
        for (int64_t rows : {2, 5, 17, 64, 129}) {
          const auto xh = Random(500 + rows, rows * n);
          backend::Tensor x = be.NewTensor(rows, n), y = be.NewTensor(rows, kCols),
                          y2 = be.NewTensor(rows, kCols);
          be.FromHost(xh, &x);
          be.MatMul(w, x, &y);
          const backend::Backend::MatMulOut outs[] = {{&w, &y2}};
          be.MatMuls(x, outs);
          std::vector<float> got, got2;
          be.ToHost(y, &got);
          be.ToHost(y2, &got2);
          const auto want = testing::MatMulRowByRow(be, w, xh, rows, n);
          EXPECT_EQ(testing::CountDifferingBits(got, want), 0)
              << Name(t) << " threads=" << threads << " n=" << n << " rows=" << rows;
          EXPECT_EQ(testing::CountDifferingBits(got2, want), 0) << "MatMuls " << Name(t);
        }
      }
  }
}

// The comparison can fail: the same lanes with a fused multiply-add, or a plain left-to-right
// sum, differ from the kernel in some outputs.
TEST(MatMulRows, NegativeControlOtherArithmeticDiffers) {
  if (!backend::HasRowsKernel(DType::F32)) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t n = 320, rows = 6;
  const int cols = 16;
  const auto w = Weights(DType::F32, cols, n, 99);
  const auto x = Random(98, rows * n);
  const auto got = Blocked(DType::F32, w, cols, x, rows, n, backend::RowsIsa::kAvx2);
  std::vector<float> fused(got.size()), seq(got.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float* wc = reinterpret_cast<const float*>(w.data()) + c * n;
      const float* xr = x.data() + r * n;
      float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      float s = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        lanes[i % 8] = std::fma(wc[i], xr[i], lanes[i % 8]);
        s += wc[i] * xr[i];
      }
      fused[r * cols + c] = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                            ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
      seq[r * cols + c] = s;
    }
  EXPECT_GT(testing::CountDifferingBits(got, fused), 0) << "a fused multiply-add never differed";
  EXPECT_GT(testing::CountDifferingBits(got, seq), 0) << "a sequential sum never differed";
}

}  // namespace
}  // namespace lockstep

// Batch invariance of the quant dot kernels: a small matmul harness (PrepareRow per activation
// row, DotRow per weight row) gives byte-identical outputs for any thread count and any
// grouping of the activation rows, and so does the real backend path (CpuBackend::MatMul and
// MatMuls, 1 to 300 rows, 1 to 7 threads); a reduction in another order is shown to differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"
#include "testing/matmul_reference.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

constexpr int64_t kK = 2048;  // row length
constexpr int64_t kM = 48;    // weight rows (outputs)
constexpr int64_t kR = 7;     // activation rows (batch)

struct Problem {
  DType t;
  std::vector<uint8_t> w;  // kM rows of type t
  std::vector<float> x;    // kR rows of f32
  size_t row_bytes;
};

Problem Make(DType t) {
  Problem p{t, {}, testing::GaussianRow(kR * kK, 11), RowBytes(t, kK)};
  const auto wf = testing::GaussianRow(kM * kK, 5);
  p.w.resize(p.row_bytes * kM);
  for (int64_t j = 0; j < kM; ++j)
    QuantizeRow(t, wf.data() + j * kK, p.w.data() + j * p.row_bytes, kK);
  return p;
}

// Y[r][j] for the activation rows [r0, r1), output rows split over `threads` threads.
void MatMul(const Problem& p, int64_t r0, int64_t r1, int threads, std::vector<float>* y) {
  std::vector<PreparedRow> px(static_cast<size_t>(r1 - r0));
  for (int64_t r = r0; r < r1; ++r) PrepareRow(p.t, p.x.data() + r * kK, kK, &px[r - r0]);
  auto work = [&](int64_t j0, int64_t j1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = j0; j < j1; ++j)
        (*y)[r * kM + j] = DotRow(p.w.data() + j * p.row_bytes, px[r - r0]);
  };
  std::vector<std::thread> pool;
  const int64_t per = (kM + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) pool.emplace_back(work, i * per, std::min(kM, (i + 1) * per));
  for (auto& th : pool) th.join();
}

std::vector<float> RunGroups(const Problem& p, const std::vector<int64_t>& groups, int threads) {
  std::vector<float> y(kR * kM, 0.0f);
  int64_t r = 0;
  for (int64_t g : groups) {
    MatMul(p, r, r + g, threads, &y);
    r += g;
  }
  EXPECT_EQ(r, kR);
  return y;
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(QuantInvariance, ThreadsAndRowGroupingsAreByteIdentical) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
        DType::MXFP4, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(std::string(Name(t)));
    const Problem p = Make(t);
    const auto base = RunGroups(p, {kR}, 1);
    EXPECT_TRUE(SameBytes(base, RunGroups(p, {kR}, 2)));
    EXPECT_TRUE(SameBytes(base, RunGroups(p, {1, 1, 1, 1, 1, 1, 1}, 1)));
    EXPECT_TRUE(SameBytes(base, RunGroups(p, {3, 4}, 2)));
    EXPECT_TRUE(SameBytes(base, RunGroups(p, {1, 6}, 2)));
    EXPECT_TRUE(SameBytes(base, RunGroups(p, {5, 2}, 1)));
  }
}

// The backend's own entry points (prepared rows, DotTile or DotCols per row count, column
// blocks over threads, MatMuls laying two weights end to end) against one row at a time, for
// batches past the 256-row prefill chunk: a kernel that changes its order only above some row
// count fails here.
TEST(QuantInvariance, BackendMatMulsEqualOneRowAtATimeUpTo300Rows) {
  constexpr int64_t kN = 256, kCols = 37;  // one K-quant block per row; not a multiple of 16
  for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::MXFP4,
                  DType::Q4_K, DType::Q6_K}) {
    std::vector<uint8_t> wbytes(RowBytes(t, kN) * kCols);
    const auto wf = testing::GaussianRow(kCols * kN, 21);
    for (int64_t j = 0; j < kCols; ++j)
      QuantizeRow(t, wf.data() + j * kN, wbytes.data() + j * RowBytes(t, kN), kN);
    const backend::Weight w = testing::HostWeight(t, kN, kCols, wbytes);
    for (int threads : {1, 2, 3, 4, 7}) {
      backend::CpuBackend be(threads);
      for (int64_t rows : {2, 33, 257, 300}) {
        const auto xh = testing::GaussianRow(rows * kN, static_cast<uint32_t>(31 + rows));
        backend::Tensor x = be.NewTensor(rows, kN), y = be.NewTensor(rows, kCols),
                        y1 = be.NewTensor(rows, kCols), y2 = be.NewTensor(rows, kCols);
        be.FromHost(xh, &x);
        be.MatMul(w, x, &y);
        const backend::Backend::MatMulOut outs[] = {{&w, &y1}, {&w, &y2}};
        be.MatMuls(x, outs);
        const auto want = testing::MatMulRowByRow(be, w, xh, rows, kN);
        for (const backend::Tensor* got : {&y, &y1, &y2}) {
          std::vector<float> h;
          be.ToHost(*got, &h);
          EXPECT_TRUE(SameBytes(h, want)) << Name(t) << " threads=" << threads << " rows=" << rows
                                          << (got == &y ? " MatMul" : " MatMuls");
        }
      }
    }
  }
}

// A weight matrix too large to stay in cache (over 8 MiB: the backend then walks one weight row a
// call instead of four) against one row at a time, at decode's one row and a few rows.
TEST(QuantInvariance, StreamedWeightMatricesEqualOneRowAtATime) {
  constexpr int64_t kN = 2048;
  for (DType t : {DType::Q8_0, DType::Q6_K}) {
    // Just over 8 MiB, and an odd column count (not a multiple of the four-row groups).
    const int64_t kCols = (static_cast<int64_t>((size_t{8} << 20) / RowBytes(t, kN)) + 2) | 1;
    std::vector<uint8_t> wbytes(RowBytes(t, kN) * kCols);
    const auto wf = testing::GaussianRow(kCols * kN, 23);
    for (int64_t j = 0; j < kCols; ++j)
      QuantizeRow(t, wf.data() + j * kN, wbytes.data() + j * RowBytes(t, kN), kN);
    ASSERT_GT(wbytes.size(), size_t{8} << 20) << Name(t);
    const backend::Weight w = testing::HostWeight(t, kN, kCols, wbytes);
    backend::CpuBackend be(2);
    for (int64_t rows : {1, 5}) {
      const auto xh = testing::GaussianRow(rows * kN, static_cast<uint32_t>(41 + rows));
      backend::Tensor x = be.NewTensor(rows, kN), y = be.NewTensor(rows, kCols);
      be.FromHost(xh, &x);
      be.MatMul(w, x, &y);
      std::vector<float> h;
      be.ToHost(y, &h);
      EXPECT_TRUE(SameBytes(h, testing::MatMulRowByRow(be, w, xh, rows, kN)))
          << Name(t) << " rows=" << rows;
    }
  }
}

// Negative control: the same per-block contributions (Q8_0 weights against a Q8_0-quantized
// activation row, the integer kernel's maths) summed in reverse block order must differ from
// DotRow in at least one bit somewhere, proving the byte comparison above can fail.
TEST(QuantInvariance, ReverseBlockOrderDiffers) {
  const Problem p = Make(DType::Q8_0);
  const auto y = RunGroups(p, {kR}, 1);
  int differing = 0;
  for (int64_t r = 0; r < kR; ++r) {
    PreparedRow px;
    PrepareRow(DType::Q8_0, p.x.data() + r * kK, kK, &px);
    for (int64_t j = 0; j < kM; ++j) {
      const uint8_t* w = p.w.data() + j * p.row_bytes;
      float rev = 0;
      for (int64_t b = kK / 32 - 1; b >= 0; --b) {
        float dx;
        std::memcpy(&dx, px.q.data() + b * 36, 4);
        uint16_t dw;
        std::memcpy(&dw, w + b * 34, 2);
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i)
          isum += static_cast<int8_t>(w[b * 34 + 2 + i]) *
                  static_cast<int8_t>(px.q[static_cast<size_t>(b * 36 + 4 + i)]);
        rev += (HalfToFloat(dw) * dx) * static_cast<float>(isum);
      }
      const float got = y[r * kM + j];
      EXPECT_NEAR(rev, got, 1e-3f * (std::fabs(got) + 1.0f));  // same maths, other order
      if (std::memcmp(&rev, &got, 4) != 0) ++differing;
    }
  }
  EXPECT_GT(differing, 0);
  std::printf("  reverse order differs in %d of %lld outputs\n", differing,
              static_cast<long long>(kR * kM));
}

}  // namespace
}  // namespace lockstep::quant

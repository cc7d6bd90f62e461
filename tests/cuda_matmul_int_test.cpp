// The CUDA integer matmul path against the CPU's quantized dot: every output bit-identical to
// quant::DotRow (activations quantized as quant::PrepareRow, exact integer block sums, the CPU's
// float order), for every row count, through MatMulRows and through the MoE's gathered tasks.
// Negative control: the float kernels on the same data miss those bits. Skipped, visibly, where
// lockstep was built without CUDA or the machine has no CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "quant/quant.h"
#include "testing/encode.h"
#include "testing/random.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#endif

namespace lockstep {
namespace {

using backend::Tensor;
using backend::Weight;

constexpr DType kIntegerFormats[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0,
                                     DType::Q4_0};

struct Case {
  DType type;
  int64_t k, n;
  std::vector<uint8_t> bytes;
  Weight view;
};

// k = 2816 (Gemma 4 26B-A4B's width): 11 blocks of 256 or 88 of 32, neither a multiple of the
// 8 partial sums nor of a warp's stride, so the tails are exercised.
Case MakeCase(DType type, int64_t n, uint32_t seed) {
  Case c{type, 2816, n, {}, {}};
  const size_t row_bytes = RowBytes(type, c.k);
  c.bytes.resize(row_bytes * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const auto row = testing::GaussianRow(c.k, seed + static_cast<uint32_t>(r), 0.5f);
    EXPECT_TRUE(testing::EncodeRow(type, row, c.bytes.data() + row_bytes * static_cast<size_t>(r)));
  }
  c.view.name = std::string("w_") + std::string(Name(type));
  c.view.type = type;
  c.view.ne = {c.k, n};
  c.view.data = c.bytes.data();
  c.view.row_bytes = row_bytes;
  return c;
}

// quant::DotRow of every (row, column): the CPU's definition of the product.
std::vector<float> CpuProduct(const Case& c, const std::vector<float>& x, int64_t rows) {
  std::vector<float> y(static_cast<size_t>(rows * c.n));
  quant::PreparedRow prepared;
  for (int64_t r = 0; r < rows; ++r) {
    quant::PrepareRow(c.type, x.data() + r * c.k, c.k, &prepared);
    for (int64_t j = 0; j < c.n; ++j)
      y[static_cast<size_t>(r * c.n + j)] =
          quant::DotRow(c.bytes.data() + j * c.view.row_bytes, prepared);
  }
  return y;
}

int64_t DifferingBits(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n + static_cast<int64_t>(a.size() != b.size());
}

class CudaIntMatMul : public ::testing::Test {
 protected:
  void SetUp() override {
#if LOCKSTEP_HAS_CUDA
    auto be = backend::CudaBackend::Create(0);
    if (!be.ok()) GTEST_SKIP() << "SKIPPED (no CUDA device): " << be.status().message();
    gpu_ = std::move(be).value();
#else
    GTEST_SKIP() << "SKIPPED (no CUDA device): lockstep was built without the CUDA backend";
#endif
  }
  Tensor Upload(const float* v, int64_t rows, int64_t cols) {
    Tensor t = gpu_->NewTensor(rows, cols);
    gpu_->FromHost(std::span(v, static_cast<size_t>(rows * cols)), &t);
    return t;
  }
  std::vector<float> Host(const Tensor& t) {
    std::vector<float> v;
    gpu_->ToHost(t, &v);
    return v;
  }
  std::unique_ptr<backend::Backend> gpu_;
};

TEST_F(CudaIntMatMul, EveryRowCountMatchesTheCpuDotBitForBit) {
  const int64_t rows = 19, n = 70;
  for (DType type : kIntegerFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    const Case c = MakeCase(type, n, 500);
    const auto x = testing::GaussianRow(rows * c.k, 21);
    const auto want = CpuProduct(c, x, rows);
    const Weight w = gpu_->PrepareWeight(c.view);
    ASSERT_EQ(w.type, type) << "converted at load although the integer path takes it";
    // Launches of 1, 2, 3, 4, 5, 8, 9 and 19 rows: every row-group instantiation and its tails.
    for (int64_t group : {1, 2, 3, 4, 5, 8, 9, 19}) {
      for (int64_t r0 = 0; r0 < rows; r0 += group) {
        const int64_t g = std::min(group, rows - r0);
        Tensor y = gpu_->NewTensor(g, n);
        gpu_->MatMul(w, Upload(x.data() + r0 * c.k, g, c.k), &y);
        const std::vector<float> part(want.begin() + r0 * n, want.begin() + (r0 + g) * n);
        ASSERT_EQ(DifferingBits(Host(y), part), 0) << "rows " << r0 << ".." << r0 + g;
      }
    }
    // MatMulRows: listed weight rows, one task per activation row.
    std::vector<int32_t> ids;
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < 3; ++i) ids.push_back(static_cast<int32_t>((r * 11 + i * 29) % n));
    backend::IntTensor id_t = gpu_->NewIntTensor(static_cast<int64_t>(ids.size()));
    gpu_->Upload(ids, &id_t);
    Tensor ys = gpu_->NewTensor(rows, 3);
    gpu_->MatMulRows(w, Upload(x.data(), rows, c.k), id_t.span(), 3, &ys);
    const auto sel = Host(ys);
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(std::memcmp(&sel[static_cast<size_t>(r * 3 + i)],
                              &want[static_cast<size_t>(r * n + ids[r * 3 + i])], sizeof(float)),
                  0)
            << "row " << r << " listed " << i;
  }
}

#if LOCKSTEP_HAS_CUDA
// The control: the float kernels (dequantized weights times float activations) on the same
// bytes give other bits in most outputs, so agreement above is not a property of the data.
TEST_F(CudaIntMatMul, NegativeControlTheFloatKernelsMissTheCpuBits) {
  const int64_t rows = 5, n = 40;
  for (DType type : kIntegerFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    ASSERT_TRUE(backend::cuda::HasIntegerPath(type));
    const Case c = MakeCase(type, n, 700);
    const auto x = testing::GaussianRow(rows * c.k, 23);
    const Weight w = gpu_->PrepareWeight(c.view);
    const Tensor tx = Upload(x.data(), rows, c.k);
    Tensor y = gpu_->NewTensor(rows, n);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the upload ran on the backend's stream
    backend::cuda::LaunchFloatMatMul(type, w.data, static_cast<int64_t>(w.row_bytes), c.k, n,
                                     tx.data(), rows, y.data(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_GT(DifferingBits(Host(y), CpuProduct(c, x, rows)), rows * n / 2);
  }
}
#endif

}  // namespace
}  // namespace lockstep

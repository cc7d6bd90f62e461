// The CUDA integer matmul path against the CPU's quantized dot: every output bit-identical to
// quant::DotRow (activations quantized as quant::PrepareRow, exact integer block sums, the CPU's
// float order), for every row count (the dp4a kernels and the tensor-core kernel) and through
// MatMulRows.
// Negative control: the float kernels on the same data miss those bits. Skipped, visibly, where
// lockstep was built without CUDA or the machine has no CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "quant/quant.h"
#include "testing/backends.h"
#include "testing/cuda_fixture.h"
#include "testing/encode.h"
#include "testing/random.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/matmul_mma.h"
#endif

namespace lockstep {
namespace {

using backend::Tensor;
using backend::Weight;

constexpr DType kIntegerFormats[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                     DType::Q8_0, DType::Q4_0, DType::Q5_0};

struct Case {
  DType type;
  int64_t k, n;
  std::vector<uint8_t> bytes;
  Weight view;
};

// k = 2816 (Gemma 4 26B-A4B's width): 11 blocks of 256 or 88 of 32, neither a multiple of the
// 8 partial sums nor of a warp's stride, so the tails are exercised.
Case MakeCase(DType type, int64_t n, uint32_t seed, int64_t k = 2816) {
  Case c{type, k, n, {}, {}};
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
    std::string why;
    gpu_ = testing::CudaBackendOrWhyNot(&why);
    if (!gpu_) GTEST_SKIP() << "SKIPPED (no CUDA device): " << why;
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
  // The gathered launch of expert tasks (task t: activation row t / x_div through expert
  // experts[t]'s n_out rows) on random activations, each output against quant::DotRow.
  // rows x n products of one format at width k against the CPU's, bit for bit.
  void CheckDense(DType type, int64_t rows, int64_t n, int64_t k, uint32_t w_seed,
                  uint32_t x_seed) {
    const Case c = MakeCase(type, n, w_seed, k);
    const auto x = testing::GaussianRow(rows * k, x_seed);
    Tensor y = gpu_->NewTensor(rows, n);
    gpu_->MatMul(gpu_->PrepareWeight(c.view), Upload(x.data(), rows, k), &y);
    ASSERT_EQ(DifferingBits(Host(y), CpuProduct(c, x, rows)), 0);
  }
  // The raw-block kernels' cases (RawBlockKernelsMatchTheCpuDotBitForBit).
  void CheckRawBlockKernels() {
    CheckDenseAndExperts({DType::Q4_K, DType::Q5_K, DType::Q6_K}, {2304, 2560, 8448}, 2304,
                         {720, 27, 930, 40});
  }
  // Random data of CheckDenseAndExperts: the dense weights and activations, the experts' ones.
  struct Seeds {
    uint32_t w, x, expert_w, expert_x;
  };
  // For each type: 40 rows x 70 outputs at each width of `ks`, then 600 skewed expert tasks of
  // 24 outputs over 130 experts at width expert_k.
  void CheckDenseAndExperts(std::initializer_list<DType> types, std::initializer_list<int64_t> ks,
                            int64_t expert_k, Seeds seeds) {
    for (DType type : types) {
      for (int64_t k : ks) {
        SCOPED_TRACE(std::string(Name(type)) + " k " + std::to_string(k));
        CheckDense(type, 40, 70, k, seeds.w, seeds.x);
      }
      const int n_expert = 130;
      const int64_t n_out = 24;
      const Case c = MakeCase(type, n_out * n_expert, seeds.expert_w, expert_k);
      const Weight w = gpu_->PrepareWeight(c.view);
      SCOPED_TRACE(std::string(Name(type)) + " experts");
      CheckExpertTasks(c, w, n_expert, n_out, SkewedExperts(600), 1, seeds.expert_x);
    }
  }
  // Expert ids of `tasks` tasks over 130 experts: every fourth task the last expert (a long
  // run), the rest spread over the first 100.
  static std::vector<int32_t> SkewedExperts(int64_t tasks) {
    std::vector<int32_t> experts;
    for (int64_t t = 0; t < tasks; ++t)
      experts.push_back(static_cast<int32_t>(t % 4 == 0 ? 129 : (t * 13 + t / 7) % 100));
    return experts;
  }
  void CheckExpertTasks(const Case& c, const Weight& w, int n_expert, int64_t n_out,
                        const std::vector<int32_t>& experts, int64_t x_div, uint32_t seed) {
#if LOCKSTEP_HAS_CUDA
    namespace cu = backend::cuda;
    const auto tasks = static_cast<int64_t>(experts.size());
    const int64_t x_rows = tasks / x_div + 1;
    const auto x = testing::GaussianRow(x_rows * c.k, seed);
    const Tensor tx = Upload(x.data(), x_rows, c.k);
    backend::IntTensor te = gpu_->NewIntTensor(tasks);
    gpu_->Upload(experts, &te);
    Tensor y = gpu_->NewTensor(tasks, n_out);
    void *act = nullptr, *tiles = nullptr;
    ASSERT_EQ(cudaMalloc(&act, cu::IntActivationBytes(c.type, x_rows, c.k)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&tiles, cu::ExpertTileBytes(tasks, n_expert)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cu::GatheredMatMul m{c.type, w.data,   static_cast<int64_t>(w.row_bytes),
                         c.k,    n_out,    tx.data(),
                         x_div,  nullptr,  te.data(),
                         n_out,  tasks,    y.data(),
                         act,    n_expert, tiles};
    cu::LaunchGatheredMatMul(m, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = Host(y);
    cudaFree(act);
    cudaFree(tiles);
    quant::PreparedRow prepared;
    for (int64_t t = 0; t < tasks; ++t) {
      quant::PrepareRow(c.type, x.data() + (t / x_div) * c.k, c.k, &prepared);
      for (int64_t j = 0; j < n_out; ++j) {
        const float want =
            quant::DotRow(c.bytes.data() + (experts[t] * n_out + j) * c.view.row_bytes, prepared);
        ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(t * n_out + j)], &want, sizeof(float)), 0)
            << "task " << t << " output " << j;
      }
    }
#else
    (void)c, (void)w, (void)n_expert, (void)n_out, (void)experts, (void)x_div, (void)seed;
#endif
  }
  std::unique_ptr<backend::Backend> gpu_;
};

TEST_F(CudaIntMatMul, EveryRowCountMatchesTheCpuDotBitForBit) {
  const int64_t rows = 70, n = 70;  // 70 x 70: whole and partial tensor-core tiles
  for (DType type : kIntegerFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    const Case c = MakeCase(type, n, 500);
    const auto x = testing::GaussianRow(rows * c.k, 21);
    const auto want = CpuProduct(c, x, rows);
    const Weight w = gpu_->PrepareWeight(c.view);
    ASSERT_EQ(w.type, type) << "converted at load although the integer path takes it";
    // Launches of 1 to 9 rows (every dp4a row-group instantiation and its tails: 70 columns are
    // too few for the tensor-core kernel below kMmaMinRows), then 16, 33 and 70 (the
    // tensor-core kernel, with partial row tiles).
    for (int64_t group : {1, 2, 3, 4, 5, 8, 9, 16, 33, 70}) {
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

// Many columns (several waves of blocks) of rows of several stripes (k = 8,448: 33 blocks of
// 256, 264 of 32; the first stripe is prefetched before the kernel waits for its inputs, the
// later ones are not). Columns repeat 509 distinct rows (a prime, so a column taken for another
// shows), which keeps the CPU's quantization and dots short.
TEST_F(CudaIntMatMul, ManyColumnsOfLongRowsMatchTheCpuDotBitForBit) {
  constexpr int64_t kK = 8448, kDistinct = 509, kN = 12000, kRows = 3;
  for (DType type : kIntegerFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    const size_t row_bytes = RowBytes(type, kK);
    std::vector<uint8_t> bytes(row_bytes * kN);
    for (int64_t r = 0; r < kDistinct; ++r) {
      const auto row = testing::GaussianRow(kK, 700 + static_cast<uint32_t>(r), 0.5f);
      ASSERT_TRUE(testing::EncodeRow(type, row, bytes.data() + row_bytes * r));
    }
    for (int64_t r = kDistinct; r < kN; ++r)
      std::memcpy(bytes.data() + row_bytes * r, bytes.data() + row_bytes * (r % kDistinct),
                  row_bytes);
    Weight view;
    view.name = std::string("w_long_") + std::string(Name(type));
    view.type = type;
    view.ne = {kK, kN};
    view.data = bytes.data();
    view.row_bytes = row_bytes;
    const Weight w = gpu_->PrepareWeight(view);
    const auto x = testing::GaussianRow(kRows * kK, 31);
    std::vector<float> want(kRows * kDistinct);
    quant::PreparedRow prepared;
    for (int64_t r = 0; r < kRows; ++r) {
      quant::PrepareRow(type, x.data() + r * kK, kK, &prepared);
      for (int64_t j = 0; j < kDistinct; ++j)
        want[r * kDistinct + j] = quant::DotRow(bytes.data() + row_bytes * j, prepared);
    }
    // The 1-, 2- and 4-row dp4a instantiations; 3 rows of the 256-element formats over these
    // 12,000 columns take the tensor-core kernel instead (DenseTakesIntMma).
    for (int64_t g = 1; g <= kRows; ++g) {
      Tensor y = gpu_->NewTensor(g, kN);
      gpu_->MatMul(w, Upload(x.data(), g, kK), &y);
      const auto got = Host(y);
      for (int64_t r = 0; r < g; ++r)
        for (int64_t j = 0; j < kN; ++j)
          ASSERT_EQ(std::memcmp(&got[r * kN + j], &want[r * kDistinct + j % kDistinct], 4), 0)
              << g << " rows, row " << r << " column " << j;
    }
  }
}

#if LOCKSTEP_HAS_CUDA
// Expert tasks (the MoE's gathered matmuls): task t reads activation row t / 2 and rows of
// expert E(t). 5 tasks run one by one (dp4a), 50 grouped by expert on tensor cores; both give
// quant::DotRow's bits.
TEST_F(CudaIntMatMul, ExpertTasksMatchTheCpuDotBitForBit) {
  const int n_expert = 6;
  const int64_t n_out = 40, x_div = 2;
  for (DType type : kIntegerFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    const Case c = MakeCase(type, n_out * n_expert, 900);
    const Weight w = gpu_->PrepareWeight(c.view);
    for (int64_t tasks : {5, 50}) {
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      std::vector<int32_t> experts;
      for (int64_t t = 0; t < tasks; ++t)
        experts.push_back(static_cast<int32_t>((t * 7 + t / 3) % n_expert));
      CheckExpertTasks(c, w, n_expert, n_out, experts, x_div, 31);
    }
  }
}

// The tensor-core kernels on short rows, where the 32-element formats' step schedule crosses
// partial sums (k = 736: 23 blocks; 704: 22, the 26B-A4B expert down projection; 64: 2 blocks,
// six empty partials) and on many expert tasks (130 experts over 8 warps' ballots, one expert
// holding 5 or more tiles, most none): every output quant::DotRow's bits.
TEST_F(CudaIntMatMul, TensorCoreShortRowsAndManyExpertTasksMatchTheCpuDotBitForBit) {
  const int64_t rows = 40, n = 70;
  for (DType type : kIntegerFormats) {
    const bool k256 = Info(type).block_size == 256;
    for (int64_t k : k256 ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{64, 704, 736}) {
      SCOPED_TRACE(std::string(Name(type)) + " k " + std::to_string(k));
      CheckDense(type, rows, n, k, 700, 23);
    }
    const int n_expert = 130;
    const int64_t n_out = 24;
    const Case c = MakeCase(type, n_out * n_expert, 910, k256 ? 768 : 704);
    const Weight w = gpu_->PrepareWeight(c.view);
    for (int64_t tasks : {600, 9000}) {  // 9,000: more than the tile table stages at once
      SCOPED_TRACE(std::string(Name(type)) + " experts, tasks " + std::to_string(tasks));
      CheckExpertTasks(c, w, n_expert, n_out, SkewedExperts(tasks), 1, 37);
    }
  }
}

// Expert tasks of short rows (the 704-wide down projections of 26B-A4B: one stripe of 32-element
// blocks, where a warp takes several columns): widths of 2, 22, 23 and 32 blocks, and 33 (the
// one-column kernel again), columns not a multiple of a block's, listed rows and experts; every
// output quant::DotRow's bits.
TEST_F(CudaIntMatMul, ShortExpertRowsMatchTheCpuDotBitForBit) {
  namespace cu = backend::cuda;
  const testing::UnverifiedKernelsScope unverified;  // the short-row kernel is off by default
  const int n_expert = 3;
  const int64_t n_out = 100, x_div = 2, tasks = 5;
  for (DType type : {DType::Q5_0, DType::Q8_0, DType::Q4_0}) {
    for (int64_t k : {64, 704, 736, 1024, 1056}) {
      SCOPED_TRACE(std::string(Name(type)) + " k " + std::to_string(k));
      const Case c = MakeCase(type, n_out * n_expert, 950, k);
      const Weight w = gpu_->PrepareWeight(c.view);
      const int64_t x_rows = (tasks + x_div - 1) / x_div;
      const auto x = testing::GaussianRow(x_rows * k, 33);
      std::vector<int32_t> experts, ids;
      for (int64_t t = 0; t < tasks; ++t)
        experts.push_back(static_cast<int32_t>((t * 2 + 1) % n_expert));
      for (int64_t t = 0; t < tasks; ++t)
        for (int64_t j = 0; j < n_out; ++j)
          ids.push_back(static_cast<int32_t>((j * 37 + t) % n_out));
      const Tensor tx = Upload(x.data(), x_rows, k);
      backend::IntTensor te = gpu_->NewIntTensor(tasks), ti = gpu_->NewIntTensor(tasks * n_out);
      gpu_->Upload(experts, &te);
      gpu_->Upload(ids, &ti);
      for (bool listed : {false, true}) {
        Tensor y = gpu_->NewTensor(tasks, n_out);
        void* act = nullptr;
        ASSERT_EQ(cudaMalloc(&act, cu::IntActivationBytes(type, x_rows, k)), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        cu::GatheredMatMul m{type,
                             w.data,
                             static_cast<int64_t>(w.row_bytes),
                             k,
                             n_out,
                             tx.data(),
                             x_div,
                             listed ? ti.data() : nullptr,
                             te.data(),
                             n_out,
                             tasks,
                             y.data(),
                             act};
        cu::LaunchGatheredMatMul(m, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const auto got = Host(y);
        cudaFree(act);
        quant::PreparedRow prepared;
        for (int64_t t = 0; t < tasks; ++t) {
          quant::PrepareRow(type, x.data() + (t / x_div) * k, k, &prepared);
          for (int64_t j = 0; j < n_out; ++j) {
            const int64_t row = experts[t] * n_out + (listed ? ids[t * n_out + j] : j);
            const float want = quant::DotRow(c.bytes.data() + row * c.view.row_bytes, prepared);
            ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(t * n_out + j)], &want, sizeof(float)),
                      0)
                << (listed ? "listed, " : "") << "task " << t << " output " << j;
          }
        }
      }
    }
  }
}

// The raw-block tensor-core kernels (Q4_K and Q5_K; Q6_K, whose 210-byte blocks sit at every
// 2-byte alignment inside their 16-byte windows) on longer rows than the short-row test: 9, 10
// and 33 blocks (a partial ending inside the pipeline's first steps, empty partials, every
// finishing order), whole and partial row and column tiles, and grouped expert tasks; every
// output quant::DotRow's bits.
TEST_F(CudaIntMatMul, RawBlockKernelsMatchTheCpuDotBitForBit) {
  CheckRawBlockKernels();
}

// The 32-element formats' pipelined kernel (matmul_mma_b32.cu): rows of 2 blocks (six empty
// partials), 22 and 23 (steps of 4 that cross partials), 66 (26B-A4B's 2,112-wide down
// projection), 88, and 1,032 (past the kernel's schedule table: the dp4a kernel takes them);
// rows of 748, 484 and 396 bytes put the blocks at every even offset of their 16-byte windows;
// whole and partial row and column tiles, and grouped expert tasks. Every output
// quant::DotRow's bits.
TEST_F(CudaIntMatMul, PipelinedBlock32KernelMatchesTheCpuDotBitForBit) {
  CheckDenseAndExperts({DType::Q8_0, DType::Q5_0, DType::Q4_0}, {64, 704, 736, 2112, 2816, 33024},
                       704, {760, 29, 970, 42});
}

// Dense launches either split in two halves of the partials (their sum is the tree's top add:
// a launch whose two halves fit one wave of the device) or whole: 40 rows x 70 outputs (4
// blocks) split, rows of 1 block (the second half empty), 9 and 33; 40 rows x enough outputs
// for more than half a wave of this device stay whole. Every output quant::DotRow's bits.
TEST_F(CudaIntMatMul, SplitAndWholeLaunchesMatchTheCpuDotBitForBit) {
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  // 2 row tiles x n_whole / 64 column tiles > 3 blocks a multiprocessor / 2.
  const int64_t n_whole = 64 * (3 * static_cast<int64_t>(sms) / 4 + 1);
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t k : {256, 2304, 8448}) {
      SCOPED_TRACE(std::string(Name(type)) + " k " + std::to_string(k) + " split");
      CheckDense(type, 40, 70, k, 740, 29);
    }
    SCOPED_TRACE(std::string(Name(type)) + " whole, " + std::to_string(n_whole) + " outputs");
    CheckDense(type, 40, n_whole, 2304, 750, 31);
  }
}

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

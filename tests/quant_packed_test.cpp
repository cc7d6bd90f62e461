// Packed weights (quant/packed.h) must give DotRow's bits for every packed type, at every
// instruction-set level the CPU has (AVX-512 with VNNI, AVX2; the same packed bytes), any number
// of activation rows, every column count of a group, and any number of blocks; whole matmuls
// through the CPU backend with packed weights must equal DotRow element by element on 1-3
// threads; and the comparison must catch a packing that moves one row (negative control).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/packed.h"
#include "quant/quant.h"
#include "testing/matmul_reference.h"
#include "testing/quant_weights.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

const DType kPackedTypes[] = {DType::Q4_K, DType::Q5_K,   DType::Q6_K, DType::Q8_0,
                              DType::Q4_0, DType::IQ4_XS, DType::MXFP4};

// y[r * n_out + j] = DotRow(weight row j, x[r]).
std::vector<float> Reference(const std::vector<uint8_t>& w, int64_t n_out,
                             const std::vector<PreparedRow>& x) {
  const size_t row_bytes = w.size() / n_out;
  std::vector<float> y(x.size() * n_out);
  for (size_t r = 0; r < x.size(); ++r)
    for (int64_t j = 0; j < n_out; ++j) y[r * n_out + j] = DotRow(w.data() + j * row_bytes, x[r]);
  return y;
}

// The same through level `isa`'s packed kernel, one group at a time (its last group partly
// filled).
std::vector<float> Packed(Isa isa, const PackedMatrix& m, const std::vector<PreparedRow>& x) {
  const int64_t n_out = m.n_rows(), rows = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(rows * n_out), -1.0f);
  for (int64_t g = 0; g < m.n_groups(); ++g) {
    const int cols = static_cast<int>(std::min<int64_t>(kPackedCols, n_out - g * kPackedCols));
    DotPackedIsa(isa, m, g, cols, x.data(), rows, y.data() + g * kPackedCols, n_out);
  }
  return y;
}

class QuantPackedIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!CpuHasIsa(GetParam()))
      GTEST_SKIP() << "this CPU lacks " << IsaName(GetParam())
                   << ": its packed kernels are not run";
  }
};

// 1-20, 33 and 64 activation rows (the register tiles and their leftovers); 1, 3, 9 and 17
// packing units (Acc8's partials wrap; Q4_0's units are two blocks); 5, 16, 37 weight rows
// (partial and whole groups, 8 columns or fewer in a group's last half).
TEST_P(QuantPackedIsa, EqualsDotRowBitForBit) {
  const Isa isa = GetParam();
  std::vector<int64_t> row_counts = {33, 64};
  for (int64_t r = 1; r <= 20; ++r) row_counts.push_back(r);
  for (DType t : kPackedTypes) {
    SCOPED_TRACE(std::string(Name(t)));
    ASSERT_TRUE(CanPackIsa(isa, t));
    const int64_t unit = PackedUnitElems(t);
    for (int64_t units : {1, 3, 9, 17}) {
      const int64_t n = unit * units;
      for (int64_t n_out : {5, 16, 37}) {
        const auto w =
            testing::RandomMatrix(t, n_out, n, static_cast<uint32_t>(10 * units + n_out));
        const auto m = PackIsa(isa, t, w.data(), RowBytes(t, n), n_out, n);
        ASSERT_NE(m, nullptr);
        for (int64_t rows : row_counts) {
          const auto x = testing::PreparedRows(t, rows, n, static_cast<uint32_t>(1000 + rows));
          EXPECT_EQ(testing::CountDifferingBits(Packed(isa, *m, x), Reference(w, n_out, x)), 0)
              << "n=" << n << " rows=" << rows << " n_out=" << n_out;
        }
      }
    }
  }
}

// Every level's packing code writes the same bytes as the best level's (Pack), so one packed
// copy serves every level's kernels.
TEST_P(QuantPackedIsa, PacksTheSameBytesAsPack) {
  for (DType t : kPackedTypes) {
    const int64_t n = 5 * PackedUnitElems(t), n_out = 37;
    const auto w = testing::RandomMatrix(t, n_out, n, 70);
    const auto a = PackIsa(GetParam(), t, w.data(), RowBytes(t, n), n_out, n);
    const auto b = Pack(t, w.data(), RowBytes(t, n), n_out, n);
    ASSERT_NE(a, nullptr) << Name(t);
    ASSERT_NE(b, nullptr) << Name(t);
    ASSERT_EQ(a->bytes(), b->bytes()) << Name(t);
    EXPECT_EQ(std::memcmp(a->group(0), b->group(0), a->bytes()), 0) << Name(t);
  }
}

// A packing whose group holds one weight row in another lane (rows 3 and 4 swapped) gives
// those two columns each other's results: the comparison above catches it, for every type.
TEST_P(QuantPackedIsa, NegativeControlSwappedRowsDiffer) {
  for (DType t : kPackedTypes) {
    const int64_t n = 3 * PackedUnitElems(t), n_out = 16, rows = 5;
    const size_t rb = RowBytes(t, n);
    const auto w = testing::RandomMatrix(t, n_out, n, 90);
    auto swapped = w;
    std::copy(w.begin() + 3 * rb, w.begin() + 4 * rb, swapped.begin() + 4 * rb);
    std::copy(w.begin() + 4 * rb, w.begin() + 5 * rb, swapped.begin() + 3 * rb);
    const auto m = PackIsa(GetParam(), t, swapped.data(), rb, n_out, n);
    ASSERT_NE(m, nullptr) << Name(t);
    const auto x = testing::PreparedRows(t, rows, n, 91);
    const auto got = Packed(GetParam(), *m, x), want = Reference(w, n_out, x);
    EXPECT_EQ(testing::CountDifferingBits(got, want), 2 * rows) << Name(t);
  }
}

// Q4_0 packs its blocks in pairs: a row of an odd number of blocks is not packed (the backend
// keeps the unpacked kernels for it).
TEST_P(QuantPackedIsa, OddQ4_0BlockCountIsNotPacked) {
  ASSERT_EQ(PackedUnitElems(DType::Q4_0), 64);
  const int64_t n = 3 * 32, n_out = 16;
  const auto w = testing::RandomMatrix(DType::Q4_0, n_out, n, 95);
  EXPECT_EQ(PackIsa(GetParam(), DType::Q4_0, w.data(), RowBytes(DType::Q4_0, n), n_out, n),
            nullptr);
}

// MXFP4's E8M0 scales through every exponent, 0-255 (the test weights keep to 118-125): the
// subnormal halves of exponents 0 and 1, and the infinities of the largest, still DotRow's bits.
TEST_P(QuantPackedIsa, Mxfp4EveryExponent) {
  const DType t = DType::MXFP4;
  const int64_t n = 16 * 32, n_out = 16;
  const size_t rb = RowBytes(t, n), bb = Info(t).type_size;
  auto w = testing::RandomMatrix(t, n_out, n, 97);
  for (int64_t c = 0; c < n_out; ++c)
    for (int64_t b = 0; b < 16; ++b) w[c * rb + b * bb] = static_cast<uint8_t>(16 * c + b);
  const auto m = PackIsa(GetParam(), t, w.data(), rb, n_out, n);
  ASSERT_NE(m, nullptr);
  const auto x = testing::PreparedRows(t, 3, n, 98);
  EXPECT_EQ(testing::CountDifferingBits(Packed(GetParam(), *m, x), Reference(w, n_out, x)), 0);
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantPackedIsa, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& level) { return std::string(IsaName(level.param)); });

// Whole matmuls through the CPU backend with a packed weight (PrepareWeight packs it): column
// blocks over 1-3 threads, 8-row slabs a thread (16 rows on 2 threads, 24 on 3), MatMuls, row
// passes of the 8192-wide case, and the row-by-row baseline (tiles off) all equal DotRow per
// element.
TEST(QuantPacked, BackendMatMulEqualsDotRow) {
  if (!CanPack(DType::Q4_K))
    GTEST_SKIP() << "no packed kernels at this CPU's level (" << IsaName(CpuIsa())
                 << "; they need AVX2 or AVX-512 with VNNI)";
  constexpr int64_t kOut = 37;
  struct Case {
    DType t;
    int64_t n;
    std::vector<int64_t> rows;
    bool packed = true;  // false: a shape Pack declines (the unpacked kernels serve it)
  };
  const Case cases[] = {{DType::Q4_K, 768, {1, 2, 5, 9, 16, 17, 24}},
                        {DType::Q5_K, 768, {1, 2, 5, 9, 16, 17, 24}},
                        {DType::Q6_K, 768, {1, 3, 8, 16}},
                        {DType::Q8_0, 288, {1, 4, 11}},
                        {DType::Q4_0, 576, {1, 4, 11}},
                        {DType::Q4_0, 288, {1, 4, 11}, false},
                        {DType::IQ4_XS, 768, {1, 4, 9}},
                        {DType::MXFP4, 576, {1, 4, 11}},
                        {DType::Q4_K, 8192, {1, 129}}};
  for (const Case& k : cases) {
    const auto wbytes = testing::RandomMatrix(k.t, kOut, k.n, 5);
    for (int threads : {1, 2, 3}) {
      backend::CpuBackend be(threads);
      const backend::Weight w = be.PrepareWeight(testing::HostWeight(k.t, k.n, kOut, wbytes));
      ASSERT_EQ(w.packed != nullptr, k.packed) << Name(k.t) << " n=" << k.n;
      for (int64_t rows : k.rows) {
        const auto xh = testing::GaussianRow(rows * k.n, static_cast<uint32_t>(rows));
        std::vector<PreparedRow> px(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) PrepareRow(k.t, xh.data() + r * k.n, k.n, &px[r]);
        const auto want = Reference(wbytes, kOut, px);
        backend::Tensor x = be.NewTensor(rows, k.n), y = be.NewTensor(rows, kOut),
                        y2 = be.NewTensor(rows, kOut), y3 = be.NewTensor(rows, kOut);
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
        const std::string where = std::string(Name(k.t)) + " n=" + std::to_string(k.n) +
                                  " threads=" + std::to_string(threads) +
                                  " rows=" + std::to_string(rows);
        EXPECT_EQ(testing::CountDifferingBits(got, want), 0) << where;
        EXPECT_EQ(testing::CountDifferingBits(got2, want), 0) << "MatMuls " << where;
        EXPECT_EQ(testing::CountDifferingBits(got3, want), 0) << "row by row " << where;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::quant

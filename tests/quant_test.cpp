// Quant layer: golden dequantization/quantization vectors (bit for bit), K-quant round trips,
// and SIMD-vs-portable agreement of the dot kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"
#include "testing/quant_weights.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

// The golden vectors live in the sibling ../shared checkout, which a plain clone lacks: the
// golden tests skip (visibly) rather than fail or index into empty buffers.
const std::string kGolden = std::string(LOCKSTEP_SHARED_DIR) + "/golden/quants/";

class QuantGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGolden + "manifest.json"))
      GTEST_SKIP() << "no golden data at " << kGolden << " (the ../shared checkout is absent)";
  }
};

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

nlohmann::json Manifest() {
  std::ifstream f(kGolden + "manifest.json");
  return nlohmann::json::parse(f);
}

// Index of the first differing 32-bit word, or -1.
int64_t FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}

std::vector<uint8_t> Dequant(DType t, const std::vector<uint8_t>& blocks, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * 4);
  DequantizeRow(t, blocks.data(), reinterpret_cast<float*>(out.data()), n);
  return out;
}

TEST_F(QuantGolden, DequantizeEveryTypeBitExact) {
  const auto m = Manifest();
  int checked = 0;
  for (const auto& [name, info] : m["types"].items()) {
    SCOPED_TRACE(name);
    const auto t = DTypeFromName(name);
    ASSERT_TRUE(t.has_value());
    ASSERT_TRUE(CanDequantize(*t));
    const auto blocks = ReadFile(kGolden + name + ".blocks.bin");
    const auto expect = ReadFile(kGolden + name + ".f32.bin");
    const int64_t n = info["n_blocks"].get<int64_t>() * info["block_size"].get<int64_t>();
    ASSERT_EQ(blocks.size(), RowBytes(*t, n));
    ASSERT_EQ(expect.size(), static_cast<size_t>(n) * 4);
    EXPECT_EQ(FirstDiff(Dequant(*t, blocks, n), expect), -1);
    ++checked;
  }
  EXPECT_EQ(checked, 24);  // F16, BF16 and the 22 block types of the manifest
}

// Negative control: one flipped bit in the golden blocks must show up in the comparison.
TEST_F(QuantGolden, FlippedBitIsDetected) {
  for (const char* name : {"Q4_K", "IQ2_XXS", "IQ1_M", "TQ1_0"}) {
    const DType t = *DTypeFromName(name);
    auto blocks = ReadFile(kGolden + std::string(name) + ".blocks.bin");
    const auto expect = ReadFile(kGolden + std::string(name) + ".f32.bin");
    const int64_t n = static_cast<int64_t>(expect.size() / 4);
    ASSERT_FALSE(blocks.empty() || expect.empty()) << name;  // never index a missing file
    blocks[blocks.size() / 2 + 3] ^= 0x10;
    EXPECT_NE(FirstDiff(Dequant(t, blocks, n), expect), -1) << name;
  }
}

TEST_F(QuantGolden, QuantizeReferenceBytesExact) {
  const auto m = Manifest();
  int checked = 0;
  for (const auto& [name, info] : m["quant"].items()) {
    SCOPED_TRACE(name);
    const DType t = *DTypeFromName(name);
    ASSERT_TRUE(CanQuantize(t));
    const auto in = ReadFile(kGolden + "quant/" + name + ".in.f32.bin");
    const auto expect = ReadFile(kGolden + "quant/" + name + ".out.bin");
    const int64_t rows = info["rows"].get<int64_t>(), len = info["row_len"].get<int64_t>();
    ASSERT_EQ(in.size(), static_cast<size_t>(rows * len) * 4);
    const size_t row_bytes = RowBytes(t, len);
    ASSERT_EQ(expect.size(), row_bytes * static_cast<size_t>(rows));
    std::vector<uint8_t> out(expect.size());
    for (int64_t r = 0; r < rows; ++r)
      QuantizeRow(t, reinterpret_cast<const float*>(in.data()) + r * len,
                  out.data() + r * row_bytes, len);
    EXPECT_EQ(FirstDiff(out, expect), -1);
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

// Relative RMS error of dequantize(quantize(x)) for Gaussian data, with per-type bounds that
// sit a little above the error of an optimal uniform quantizer with that many levels.
TEST(QuantRoundTrip, KQuantsAndLegacyErrorBounds) {
  const struct {
    DType t;
    double bound;
  } cases[] = {{DType::Q8_0, 0.01}, {DType::Q6_K, 0.03}, {DType::Q5_K, 0.05}, {DType::Q5_0, 0.07},
               {DType::Q5_1, 0.06}, {DType::Q4_K, 0.10}, {DType::Q4_0, 0.14}, {DType::Q4_1, 0.12},
               {DType::Q3_K, 0.20}, {DType::Q2_K, 0.40}};
  const int64_t n = 4096;
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(Name(c.t)));
    const auto x = testing::GaussianRow(n, 7);
    std::vector<uint8_t> q(RowBytes(c.t, n)), q2(q.size());
    QuantizeRow(c.t, x.data(), q.data(), n);
    QuantizeRow(c.t, x.data(), q2.data(), n);
    EXPECT_EQ(q, q2);  // deterministic
    std::vector<float> y(static_cast<size_t>(n)), y2(y.size());
    DequantizeRow(c.t, q.data(), y.data(), n);
    DequantizeRow(c.t, q2.data(), y2.data(), n);
    EXPECT_EQ(std::memcmp(y.data(), y2.data(), y.size() * 4), 0);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]);
      ref += x[i] * x[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, c.bound);
    std::printf("  %-5s relative rms error %.4f\n", std::string(Name(c.t)).c_str(), rel);
  }
}

// All-zero and constant rows must not produce NaN/Inf.
TEST(QuantRoundTrip, DegenerateRows) {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0,
                  DType::Q8_0}) {
    for (float c : {0.0f, 1.5f, -2.0f}) {
      std::vector<float> x(256, c), y(256);
      std::vector<uint8_t> q(RowBytes(t, 256));
      QuantizeRow(t, x.data(), q.data(), 256);
      DequantizeRow(t, q.data(), y.data(), 256);
      for (float v : y) {
        ASSERT_TRUE(std::isfinite(v)) << Name(t);
        EXPECT_NEAR(v, c, std::fabs(c) * 0.1 + 1e-6) << Name(t);
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::quant

namespace lockstep::quant {
namespace {

const DType kFastTypes[] = {DType::F32,    DType::F16,   DType::BF16, DType::Q8_0,
                            DType::Q4_0,   DType::Q4_1,  DType::Q5_0, DType::Q5_1,
                            DType::IQ4_NL, DType::MXFP4, DType::Q2_K, DType::Q3_K,
                            DType::Q4_K,   DType::Q5_K,  DType::Q6_K, DType::IQ4_XS};

// Every kernel level the CPU has (AVX-512, AVX2) equals the portable kernels bit for bit, for
// 1 to 4 weight rows per call and lengths with and without a tail of blocks; DotRow equals
// them too; and all are close to the f32 dot of the dequantized weights (the maths check).
TEST(QuantDot, EveryIsaMatchesPortableBitForBitAndIsAccurate) {
  for (DType t : kFastTypes) {
    SCOPED_TRACE(std::string(Name(t)));
    const int64_t block = Info(t).block_size;
    std::printf("  %-7s", std::string(Name(t)).c_str());
    for (int l = 0; l < kNumIsas; ++l)
      if (CpuHasIsa(static_cast<Isa>(l)))
        std::printf(" %s->%s", std::string(IsaName(static_cast<Isa>(l))).c_str(),
                    std::string(IsaName(KernelIsa(static_cast<Isa>(l), t))).c_str());
    std::printf("\n");
    for (int64_t n : {block * 4, block * 13, int64_t{4096}}) {
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        std::vector<std::vector<uint8_t>> ws;
        const void* ptrs[kMaxDotCols];
        for (int c = 0; c < kMaxDotCols; ++c) {
          ws.push_back(testing::RandomWeights(t, n, 10 * seed + c));
          ptrs[c] = ws.back().data();
        }
        const auto x = testing::GaussianRow(n, 100 + seed);
        PreparedRow px;
        PrepareRow(t, x.data(), n, &px);
        float portable[kMaxDotCols];
        DotColsIsa(Isa::kPortable, ptrs, kMaxDotCols, px, portable);
        for (int l = 1; l < kNumIsas; ++l) {
          const auto isa = static_cast<Isa>(l);
          if (!CpuHasIsa(isa)) continue;
          for (int cols = 1; cols <= kMaxDotCols; ++cols) {
            float out[kMaxDotCols];
            DotColsIsa(isa, ptrs, cols, px, out);
            for (int c = 0; c < cols; ++c)
              ASSERT_EQ(testing::FloatBits(out[c]), testing::FloatBits(portable[c]))
                  << IsaName(isa) << " n=" << n << " cols=" << cols << " c=" << c;
          }
        }
        ASSERT_EQ(testing::FloatBits(DotRow(ptrs[0], px)), testing::FloatBits(portable[0]));
        std::vector<float> wf(static_cast<size_t>(n));
        DequantizeRow(t, ws[0].data(), wf.data(), n);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          ref += static_cast<double>(wf[i]) * x[i];
          mag += std::fabs(static_cast<double>(wf[i]) * x[i]);
        }
        // Activations are quantized to 8 bits for the integer types: error well under 1% of
        // the sum of magnitudes; float types are near exact.
        EXPECT_NEAR(portable[0], ref, mag * 0.01 + 1e-6);
      }
    }
  }
}

// DotF32Cols (the attention score kernel) equals DotF32 bit for bit, tails included.
TEST(QuantDot, F32ColsEqualDotF32BitForBit) {
  for (int64_t n : {5, 64, 130, 256, 1003}) {
    std::vector<std::vector<float>> rows;
    const float* ptrs[kMaxDotCols];
    for (int c = 0; c < kMaxDotCols; ++c) {
      rows.push_back(testing::GaussianRow(n, 300 + c));
      ptrs[c] = rows.back().data();
    }
    const auto b = testing::GaussianRow(n, 400);
    for (int cols = 1; cols <= kMaxDotCols; ++cols) {
      float out[kMaxDotCols];
      DotF32Cols(ptrs, cols, b.data(), n, out);
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(testing::FloatBits(out[c]), testing::FloatBits(DotF32(ptrs[c], b.data(), n)))
            << "n=" << n << " cols=" << cols << " c=" << c;
    }
  }
}

// DotF32Block (attention scores of a block of queries against four shared keys) equals DotF32
// bit for bit on every level this CPU runs, for 1-4 queries and tails of every length mod 8.
TEST(QuantDot, F32BlockEqualsDotF32BitForBit) {
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (!CpuHasIsa(isa)) continue;
    SCOPED_TRACE(std::string(IsaName(isa)));
    for (int64_t n : {5, 64, 130, 256, 1003}) {
      std::vector<std::vector<float>> keys, queries;
      const float *kp[kMaxDotCols], *qp[kMaxDotQueries];
      for (int c = 0; c < kMaxDotCols; ++c) {
        keys.push_back(testing::GaussianRow(n, 800 + c));
        kp[c] = keys.back().data();
      }
      for (int q = 0; q < kMaxDotQueries; ++q) {
        queries.push_back(testing::GaussianRow(n, 900 + q));
        qp[q] = queries.back().data();
      }
      for (int nq = 1; nq <= kMaxDotQueries; ++nq) {
        float out[kMaxDotQueries][kMaxDotCols];
        float* op[kMaxDotQueries] = {out[0], out[1], out[2], out[3]};
        DotF32BlockIsa(isa, kp, qp, nq, n, op);
        for (int q = 0; q < nq; ++q)
          for (int c = 0; c < kMaxDotCols; ++c)
            ASSERT_EQ(testing::FloatBits(out[q][c]), testing::FloatBits(DotF32(kp[c], qp[q], n)))
                << "n=" << n << " queries=" << nq << " q=" << q << " c=" << c;
      }
      // Negative control: one sequential fused sum per pair (another order) differs somewhere,
      // so the comparison above sees the order.
      int differ = 0;
      for (int q = 0; q < kMaxDotQueries; ++q)
        for (int c = 0; c < kMaxDotCols; ++c) {
          float seq = 0.0f;
          for (int64_t i = 0; i < n; ++i) seq = std::fma(kp[c][i], qp[q][i], seq);
          differ += testing::FloatBits(seq) != testing::FloatBits(DotF32(kp[c], qp[q], n));
        }
      if (n >= 256) {
        EXPECT_GT(differ, 0) << "n=" << n;
      }
    }
  }
}

// AddWeightedRows against the scalar loop it defines (each product rounded, added in row
// order), on every level this CPU runs, for 1 to kMaxWeightedAccs accumulators (each with its
// own weights) and lengths around each level's steps (AVX2: 16 and 8 and a scalar tail;
// AVX-512: 64, 16 and a masked tail); a fused multiply-add or the rows added in reverse differ
// (negative controls: the comparison sees the order).
void CheckAddWeightedRows(Isa isa) {
  for (int64_t n : {5, 8, 16, 40, 256, 300, 512, 1003}) {
    for (int n_rows : {1, 3, 16}) {
      for (int n_acc = 1; n_acc <= kMaxWeightedAccs; ++n_acc) {
        std::vector<std::vector<float>> rows, w, acc;
        std::vector<const float*> row_ptrs, w_ptrs;
        std::vector<float*> acc_ptrs;
        for (int t = 0; t < n_rows; ++t) rows.push_back(testing::GaussianRow(n, 500 + t));
        for (int q = 0; q < n_acc; ++q) {
          w.push_back(testing::GaussianRow(n_rows, 600 + q));
          acc.push_back(testing::GaussianRow(n, 700 + q));
        }
        for (const auto& r : rows) row_ptrs.push_back(r.data());
        for (const auto& r : w) w_ptrs.push_back(r.data());
        const auto start = acc;
        for (auto& r : acc) acc_ptrs.push_back(r.data());
        AddWeightedRowsIsa(isa, row_ptrs.data(), n_rows, w_ptrs.data(), n_acc, n, acc_ptrs.data());
        for (int q = 0; q < n_acc; ++q) {
          auto want = start[static_cast<size_t>(q)], fused = want, reversed = want;
          const auto& wq = w[static_cast<size_t>(q)];
          for (int64_t i = 0; i < n; ++i) {
            for (int t = 0; t < n_rows; ++t) {
              want[i] = want[i] + wq[t] * rows[t][i];
              fused[i] = std::fma(wq[t], rows[t][i], fused[i]);
              const int r = n_rows - 1 - t;
              reversed[i] = reversed[i] + wq[r] * rows[r][i];
            }
            ASSERT_EQ(testing::FloatBits(acc[q][i]), testing::FloatBits(want[i]))
                << "n=" << n << " rows=" << n_rows << " accs=" << n_acc << " q=" << q << " i=" << i;
          }
          if (n >= 256 && n_rows == 16) {
            EXPECT_NE(std::memcmp(fused.data(), want.data(), 4 * n), 0);
            EXPECT_NE(std::memcmp(reversed.data(), want.data(), 4 * n), 0);
          }
        }
      }
    }
  }
}

TEST(QuantDot, AddWeightedRowsEqualsScalarOrderBitForBit) {
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (!CpuHasIsa(isa)) continue;
    SCOPED_TRACE(std::string(IsaName(isa)));
    CheckAddWeightedRows(isa);
  }
}

// Negative control for the bit comparison: a kernel with another block order differs.
TEST(QuantDot, DifferentOrderChangesBits) {
  const int64_t n = 4096;
  const auto w = testing::RandomWeights(DType::F32, n, 3);
  const auto x = testing::GaussianRow(n, 4);
  PreparedRow px;
  PrepareRow(DType::F32, x.data(), n, &px);
  const float canonical = DotRow(w.data(), px);
  const auto* wf = reinterpret_cast<const float*>(w.data());
  float seq = 0;
  for (int64_t i = 0; i < n; ++i) seq += wf[i] * x[i];
  EXPECT_NE(testing::FloatBits(canonical), testing::FloatBits(seq));
}

}  // namespace
}  // namespace lockstep::quant

// The CPU matmul's multi-row float kernel must equal quant::DotRow bit for bit for every row
// count and length (tails included); a different summation order must not.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/matmul_rows.h"
#include "quant/quant.h"
#include "sample/sampler.h"

namespace lockstep {
namespace {

std::vector<float> Random(uint64_t seed, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(sample::UniformAt(seed, 0, i) * 2 - 1);
  return v;
}

bool SameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST(MatmulRows, EqualsDotRowBitForBit) {
  for (DType t : {DType::F32, DType::F16}) {
    if (!backend::HasDotRows4(t)) GTEST_SKIP() << "no AVX2 on this CPU";
    for (int64_t n : {8, 13, 64, 320, 1003}) {
      const auto wf = Random(1, n);
      std::vector<uint8_t> w(RowBytes(t, n));
      quant::QuantizeRow(t, wf.data(), w.data(), n);
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < 4; ++r) xs.push_back(Random(10 + r, n));
      for (int rows = 1; rows <= 4; ++rows) {
        const float* ptrs[4] = {xs[0].data(), xs[1].data(), xs[2].data(), xs[3].data()};
        float out[4];
        backend::DotRows4(t, w.data(), ptrs, rows, n, out);
        for (int r = 0; r < rows; ++r) {
          quant::PreparedRow p;
          quant::PrepareRow(t, xs[r].data(), n, &p);
          EXPECT_TRUE(SameBits(out[r], quant::DotRow(w.data(), p)))
              << Name(t) << " n=" << n << " rows=" << rows << " r=" << r;
        }
      }
    }
  }
}

TEST(MatmulRows, NegativeControlOtherOrderDiffers) {
  if (!backend::HasDotRows4(DType::F32)) GTEST_SKIP() << "no AVX2 on this CPU";
  int differing = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int64_t n = 320;
    const auto w = Random(100 + seed, n), x = Random(200 + seed, n);
    const float* ptrs[1] = {x.data()};
    float out;
    backend::DotRows4(DType::F32, w.data(), ptrs, 1, n, &out);
    float seq = 0.0f;  // plain left-to-right order
    for (int64_t i = 0; i < n; ++i) seq += w[i] * x[i];
    differing += !SameBits(out, seq);
  }
  EXPECT_GT(differing, 0) << "a sequential sum never differed: the comparison cannot fail";
}

}  // namespace
}  // namespace lockstep

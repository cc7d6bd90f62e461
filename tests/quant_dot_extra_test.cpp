// Integer dot kernels of dot_extra.h: AVX2 equals portable bit for bit, both are accurate, and
// the comparisons are sensitive enough to catch a changed byte or reduction order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/dot_extra.h"
#include "quant/quant.h"
#include "testing/random.h"

namespace lockstep::quant {
namespace {

const DType kTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K};

bool HasAvx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

// Random level bytes with sane f16 scale fields (d > 0; the Q4_1/Q5_1 offset m is signed, as
// real blocks store the block minimum). fill >= 0 sets every level byte to it instead.
std::vector<uint8_t> RandomWeights(DType t, int64_t n, uint32_t seed, int fill = -1) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(RowBytes(t, n));
  for (auto& b : w) b = static_cast<uint8_t>(fill >= 0 ? fill : static_cast<int>(rng() & 0xFF));
  int d_off = 0, m_off = -1;
  if (t == DType::Q4_1 || t == DType::Q5_1) m_off = 2;
  if (t == DType::Q2_K) d_off = 80, m_off = 82;  // dmin is subtracted: keep it positive
  if (t == DType::Q3_K) d_off = 108;
  std::uniform_real_distribution<float> u(0.001f, 0.05f), um(-0.4f, 0.1f);
  const size_t bytes = Info(t).type_size;
  for (size_t b = 0; b < w.size() / bytes; ++b) {
    uint8_t* blk = w.data() + b * bytes;
    const uint16_t d = FloatToHalf(u(rng));
    std::memcpy(blk + d_off, &d, 2);
    if (m_off < 0) continue;
    const uint16_t m = FloatToHalf(t == DType::Q2_K ? u(rng) : um(rng));
    std::memcpy(blk + m_off, &m, 2);
  }
  return w;
}

// The Q8x32 activation layout of dot_internal.h, quantized like PrepareRow (d = amax/127,
// q = lround(x / d) via the reciprocal), until PrepareRow learns ActivationFormatExtra.
void PrepareQ8x32(DType t, const float* x, int64_t n, PreparedRow* out) {
  out->wtype = t;
  out->n = n;
  out->f32.clear();
  out->q.assign(static_cast<size_t>(n / 32) * detail::kQ8x32Bytes, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* blk = out->q.data() + b * detail::kQ8x32Bytes;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i)
      blk[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[32 * b + i] * id)));
    std::memcpy(blk, &d, 4);
  }
}

PreparedRow Prepare(DType t, const std::vector<float>& x) {
  PreparedRow p;
  const auto n = static_cast<int64_t>(x.size());
  if (detail::ActivationFormatExtra(t) == detail::ActFormat::kQ8x32)
    PrepareQ8x32(t, x.data(), n, &p);
  else
    PrepareRow(t, x.data(), n, &p);
  return p;
}

detail::RowDotFn Portable(DType t) {
  if (auto f = detail::PortableDotExtra(t)) return f;
  return detail::PortableDot(t);
}

std::vector<int64_t> Lengths(DType t) {
  if (Info(t).block_size == 32) return {96, 256, 320, 512, 4096};
  return {256, 512, 768, 4096};
}

TEST(QuantDotExtra, ActivationHelperMatchesPrepareRow) {
  const auto x = testing::GaussianRow(4096, 11);
  PreparedRow ref, mine;
  PrepareRow(DType::Q4_0, x.data(), 4096, &ref);  // an existing Q8x32 type
  PrepareQ8x32(DType::Q4_0, x.data(), 4096, &mine);
  EXPECT_EQ(ref.q, mine.q);
  // Once the dispatch is wired, PrepareRow itself must produce the layout the kernels expect.
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    PrepareRow(t, x.data(), 4096, &ref);
    if (!ref.q.empty()) {
      EXPECT_EQ(ref.q, Prepare(t, x).q) << Name(t);
    }
  }
}

TEST(QuantDotExtra, TablesCoverExactlyTheNewKernels) {
  for (DType t : kTypes) {
    EXPECT_NE(Portable(t), nullptr) << Name(t);
    EXPECT_NE(detail::Avx2DotExtra(t), nullptr) << Name(t);
  }
  EXPECT_EQ(detail::PortableDotExtra(DType::Q4_0), nullptr);
  EXPECT_EQ(detail::Avx2DotExtra(DType::Q4_K), nullptr);
  EXPECT_EQ(detail::ActivationFormatExtra(DType::Q4_K), detail::ActFormat::kF32);
}

// Both kernels within 1% of sum |w x| of the f32 dot of the dequantized weights (the error is
// the 8-bit activation quantization), and AVX2 == portable bit for bit.
void CheckRow(DType t, const std::vector<uint8_t>& w, const std::vector<float>& x,
              bool avx2 = true) {
  const auto n = static_cast<int64_t>(x.size());
  const PreparedRow px = Prepare(t, x);
  const float portable = Portable(t)(w.data(), px);
  std::vector<float> wf(static_cast<size_t>(n));
  DequantizeRow(t, w.data(), wf.data(), n);
  double ref = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref += static_cast<double>(wf[i]) * x[i];
    mag += std::fabs(static_cast<double>(wf[i]) * x[i]);
  }
  EXPECT_NEAR(portable, ref, mag * 0.01 + 1e-6);
  if (!avx2 || !HasAvx2()) return;
  const float fast = detail::Avx2DotExtra(t)(w.data(), px);
  ASSERT_EQ(testing::FloatBits(fast), testing::FloatBits(portable)) << fast << " vs " << portable;
}

TEST(QuantDotExtra, Avx2MatchesPortableBitForBitAndIsAccurate) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2/FMA/F16C: only the portable accuracy is checked";
  for (DType t : kTypes) {
    for (int64_t n : Lengths(t)) {
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(std::string(Name(t)) + " n=" + std::to_string(n) +
                     " seed=" + std::to_string(seed));
        CheckRow(t, RandomWeights(t, n, seed), testing::GaussianRow(n, 100 + seed));
      }
    }
  }
}

// The accuracy half of the check on every CPU (the AVX2 test above skips without AVX2).
TEST(QuantDotExtra, PortableIsAccurate) {
  for (DType t : kTypes) {
    for (int64_t n : Lengths(t)) {
      SCOPED_TRACE(std::string(Name(t)) + " n=" + std::to_string(n));
      for (uint32_t seed = 1; seed <= 3; ++seed)
        CheckRow(t, RandomWeights(t, n, 40 + seed), testing::GaussianRow(n, 140 + seed), false);
    }
  }
}

// Extreme operands: every level byte at its maximum and activations of one magnitude, so all
// activation levels are +-127 and any int16 saturation in maddubs would show up.
TEST(QuantDotExtra, ExtremeLevelsDoNotSaturate) {
  for (DType t : kTypes) {
    for (int fill : {0x00, 0xFF, 0xAA, 0x55}) {
      SCOPED_TRACE(std::string(Name(t)) + " fill=" + std::to_string(fill));
      const int64_t n = 512;
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
      CheckRow(t, RandomWeights(t, n, 9, fill), x);
      for (auto& v : x) v = 1.0f;
      CheckRow(t, RandomWeights(t, n, 9, fill), x);
    }
  }
}

// Negative control: one changed level byte changes both results (and they still agree).
TEST(QuantDotExtra, FlippedWeightByteChangesResult) {
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string(Name(t)));
    const int64_t n = 4096;
    auto w = RandomWeights(t, n, 21);
    const PreparedRow px = Prepare(t, testing::GaussianRow(n, 22));
    const float before = Portable(t)(w.data(), px);
    // Offset 10 of the middle block: a level byte (Q4_1/Q5_x), high-bit mask (Q3_K), scale
    // (Q2_K).
    w[(w.size() / Info(t).type_size / 2) * Info(t).type_size + 10] ^= 0x0F;
    const float after = Portable(t)(w.data(), px);
    EXPECT_NE(testing::FloatBits(before), testing::FloatBits(after));
    if (HasAvx2()) {
      EXPECT_EQ(testing::FloatBits(detail::Avx2DotExtra(t)(w.data(), px)),
                testing::FloatBits(after));
    }
  }
}

// Negative control for the bit comparison: the Q4_1 block contributions, recomputed here from
// the layout, reproduce the kernel through Acc8 but not through a sequential sum.
TEST(QuantDotExtra, DifferentBlockOrderChangesBits) {
  const int64_t n = 4096;
  const auto w = RandomWeights(DType::Q4_1, n, 31);
  const PreparedRow px = Prepare(DType::Q4_1, testing::GaussianRow(n, 32));
  detail::Acc8 acc;
  float seq = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* wb = w.data() + b * 20;
    const uint8_t* xb = px.q.data() + b * detail::kQ8x32Bytes;
    int32_t isum = 0, xsum = 0;
    for (int j = 0; j < 16; ++j) {
      const auto x0 = static_cast<int8_t>(xb[4 + j]), x1 = static_cast<int8_t>(xb[20 + j]);
      isum += (wb[4 + j] & 0xF) * x0 + (wb[4 + j] >> 4) * x1;
      xsum += x0 + x1;
    }
    float dx;
    std::memcpy(&dx, xb, 4);
    uint16_t hd, hm;
    std::memcpy(&hd, wb, 2);
    std::memcpy(&hm, wb + 2, 2);
    const float c = detail::CombineAddMin(HalfToFloat(hd), HalfToFloat(hm), dx, isum, xsum);
    acc.Add(b, c);
    seq += c;
  }
  const float kernel = Portable(DType::Q4_1)(w.data(), px);
  EXPECT_EQ(testing::FloatBits(acc.Sum()), testing::FloatBits(kernel));
  EXPECT_NE(testing::FloatBits(seq), testing::FloatBits(kernel));
}

}  // namespace
}  // namespace lockstep::quant

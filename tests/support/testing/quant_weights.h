// Random but well-formed quantized weight rows for the kernel tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"
#include "testing/random.h"

namespace lockstep::testing {

// The byte offsets of the f16 scale fields in one block of `t` (MXFP4's E8M0 scale is byte 0).
inline std::vector<int> HalfScaleFields(DType t) {
  switch (t) {
    case DType::Q2_K:
      return {80, 82};
    case DType::Q3_K:
      return {108};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q6_K:
      return {208};
    case DType::MXFP4:
      return {};
    default:
      return {0};
  }
}

// Random bytes in every block of a block-quantized row, then every scale field set from
// `scale()` (f16) and MXFP4's exponent byte to 2^(118..125 - 127): no NaN/Inf, every level used.
template <typename Bits, typename Scale>
void FillWellFormedBlocks(DType t, uint8_t* row, size_t bytes, Bits bits, Scale scale) {
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t b = bits();
    std::memcpy(row + i, &b, std::min<size_t>(8, bytes - i));
  }
  const std::vector<int> fields = HalfScaleFields(t);
  const size_t block = Info(t).type_size;
  for (uint8_t* blk = row; blk < row + bytes; blk += block) {
    if (t == DType::MXFP4) blk[0] = static_cast<uint8_t>(118 + bits() % 8);
    for (int off : fields) {
      const uint16_t h = FloatToHalf(scale());
      std::memcpy(blk + off, &h, 2);
    }
  }
}

// A random but well-formed weight row: random bytes with every scale field set to a sane f16
// (or E8M0) value, so the row has no NaN/Inf and uses every level.
inline std::vector<uint8_t> RandomWeights(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(RowBytes(t, n));
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    const auto x = testing::GaussianRow(n, seed);
    quant::QuantizeRow(t, x.data(), w.data(), n);
    return w;
  }
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  FillWellFormedBlocks(
      t, w.data(), w.size(), [&rng] { return (uint64_t{rng()} << 32) | rng(); },
      [&] { return u(rng); });
  return w;
}

// `rows` random weight rows of n elements of type t (seeds seed, seed + 1, ...), back to back.
inline std::vector<uint8_t> RandomMatrix(DType t, int64_t rows, int64_t n, uint32_t seed) {
  std::vector<uint8_t> w;
  for (int64_t c = 0; c < rows; ++c) {
    const auto row = RandomWeights(t, n, seed + static_cast<uint32_t>(c));
    w.insert(w.end(), row.begin(), row.end());
  }
  return w;
}

// `rows` Gaussian activation rows of n elements, each prepared for weights of type t.
inline std::vector<quant::PreparedRow> PreparedRows(DType t, int64_t rows, int64_t n,
                                                    uint32_t seed) {
  std::vector<quant::PreparedRow> p(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto x = GaussianRow(n, seed + static_cast<uint32_t>(r));
    quant::PrepareRow(t, x.data(), n, &p[static_cast<size_t>(r)]);
  }
  return p;
}

}  // namespace lockstep::testing

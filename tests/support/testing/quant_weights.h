// Random but well-formed quantized weight rows for the kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"
#include "testing/random.h"

namespace lockstep::testing {

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
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const DTypeInfo& info = Info(t);
  std::vector<int> half_fields;
  switch (t) {
    case DType::Q2_K:
      half_fields = {80, 82};
      break;
    case DType::Q3_K:
      half_fields = {108};
      break;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      half_fields = {0, 2};
      break;
    case DType::Q6_K:
      half_fields = {208};
      break;
    case DType::MXFP4:
      break;
    default:
      half_fields = {0};
      break;
  }
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  for (size_t b = 0; b < w.size() / info.type_size; ++b) {
    uint8_t* blk = w.data() + b * info.type_size;
    if (t == DType::MXFP4) blk[0] = static_cast<uint8_t>(118 + rng() % 8);
    for (int off : half_fields) {
      const uint16_t h = FloatToHalf(u(rng));
      std::memcpy(blk + off, &h, 2);
    }
  }
  return w;
}

}  // namespace lockstep::testing

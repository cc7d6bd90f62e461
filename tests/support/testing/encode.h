// Float rows written in a weight format (tests and benches build weights of every type).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"

namespace lockstep::testing {

// Writes `row` into `dst` (RowBytes(type, row.size()) bytes) in `type`: F32, F16 and BF16 by
// rounding, block formats through quant::QuantizeRow. False for a type lockstep cannot write.
inline bool EncodeRow(DType type, std::span<const float> row, uint8_t* dst) {
  if (type == DType::F32) {
    std::memcpy(dst, row.data(), row.size_bytes());
  } else if (type == DType::F16 || type == DType::BF16) {
    for (size_t i = 0; i < row.size(); ++i) {
      const uint16_t h = type == DType::F16 ? FloatToHalf(row[i]) : FloatToBF16(row[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    if (!quant::CanQuantize(type)) return false;
    quant::QuantizeRow(type, row.data(), dst, static_cast<int64_t>(row.size()));
  }
  return true;
}

}  // namespace lockstep::testing

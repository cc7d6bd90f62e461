// GGML tensor element types (ids as stored in GGUF) and their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
};

// nullopt for ids lockstep does not know (a GGUF file may name any uint32).
std::optional<DTypeInfo> LookupDType(uint32_t id);
const DTypeInfo& Info(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
inline std::string_view Name(DType t) { return Info(t).name; }
// Bytes of one row of n elements; n must be a multiple of the block size.
size_t RowBytes(DType t, int64_t n);

}  // namespace lockstep

// Table of GGML element types: names, block sizes and block byte sizes.
#include "core/dtype.h"

#include <array>

#include "core/check.h"

namespace lockstep {
namespace {

constexpr std::array<DTypeInfo, 32> kTypes = {{
    {DType::F32, "F32", 1, 4},         {DType::F16, "F16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},     {DType::Q4_1, "Q4_1", 32, 20},
    {DType::Q5_0, "Q5_0", 32, 22},     {DType::Q5_1, "Q5_1", 32, 24},
    {DType::Q8_0, "Q8_0", 32, 34},     {DType::Q8_1, "Q8_1", 32, 36},
    {DType::Q2_K, "Q2_K", 256, 84},    {DType::Q3_K, "Q3_K", 256, 110},
    {DType::Q4_K, "Q4_K", 256, 144},   {DType::Q5_K, "Q5_K", 256, 176},
    {DType::Q6_K, "Q6_K", 256, 210},   {DType::Q8_K, "Q8_K", 256, 292},
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66}, {DType::IQ2_XS, "IQ2_XS", 256, 74},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98}, {DType::IQ1_S, "IQ1_S", 256, 50},
    {DType::IQ4_NL, "IQ4_NL", 32, 18}, {DType::IQ3_S, "IQ3_S", 256, 110},
    {DType::IQ2_S, "IQ2_S", 256, 82},  {DType::IQ4_XS, "IQ4_XS", 256, 136},
    {DType::I8, "I8", 1, 1},           {DType::I16, "I16", 1, 2},
    {DType::I32, "I32", 1, 4},         {DType::I64, "I64", 1, 8},
    {DType::F64, "F64", 1, 8},         {DType::IQ1_M, "IQ1_M", 256, 56},
    {DType::BF16, "BF16", 1, 2},       {DType::TQ1_0, "TQ1_0", 256, 54},
    {DType::TQ2_0, "TQ2_0", 256, 66},  {DType::MXFP4, "MXFP4", 32, 17},
}};

}  // namespace

std::optional<DTypeInfo> LookupDType(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const DTypeInfo& Info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  CHECKF(false, "unknown dtype {}", static_cast<uint32_t>(t));
  __builtin_unreachable();
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

size_t RowBytes(DType t, int64_t n) {
  const auto& i = Info(t);
  CHECKF(n % i.block_size == 0, "{} row of {} elements is not a whole number of blocks", i.name, n);
  return static_cast<size_t>(n / i.block_size) * i.type_size;
}

}  // namespace lockstep

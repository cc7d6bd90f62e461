// Lookup tables that define the non-linear GGUF formats (IQ grids, IQ4/MXFP4 value lists).
#pragma once

#include <array>
#include <cstdint>

namespace lockstep::quant::tables {

// 8-wide grids: IQ2 entries are magnitudes in {8, 25, 43}; IQ1 entries are in {-1, 0, 1}.
extern const std::array<std::array<int8_t, 8>, 256> kIq2xxsGrid;
extern const std::array<std::array<int8_t, 8>, 512> kIq2xsGrid;
extern const std::array<std::array<int8_t, 8>, 1024> kIq2sGrid;
extern const std::array<std::array<int8_t, 8>, 2048> kIq1sGrid;
// 4-wide grids of magnitudes.
extern const std::array<std::array<uint8_t, 4>, 256> kIq3xxsGrid;
extern const std::array<std::array<uint8_t, 4>, 512> kIq3sGrid;

// IQ2/IQ3 sign patterns: 7 stored bits, the 8th chosen so the count of minus signs is even.
constexpr uint8_t Ksign(uint32_t i7) {
  const uint32_t parity = static_cast<uint32_t>(__builtin_popcount(i7 & 127)) & 1;
  return static_cast<uint8_t>((i7 & 127) | (parity << 7));
}

// IQ4_NL / IQ4_XS non-linear levels.
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4 (E2M1) values doubled, so they are integers; the scale is halved to compensate.
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ1_S / IQ1_M grid offset.
constexpr float kIq1Delta = 0.125f;

}  // namespace lockstep::quant::tables

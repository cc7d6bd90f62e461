// Dequantization of the grid ("IQ") formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M and IQ4_XS.
#include "quant/iq_tables.h"
#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

using tables::Ksign;

inline float Signed(float v, uint8_t signs, int j) {
  return v * ((signs >> j) & 1 ? -1.f : 1.f);
}

// IQ2_XXS: f16 d, then per 32 elements two u32: four 8-bit grid indices, and four 7-bit sign
// indices plus a 4-bit scale in the top bits.
void DeqIq2Xxs(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* g = b + 2 + 8 * ib;
    const uint32_t aux = Load32(g + 4);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const auto& grid = tables::kIq2xxsGrid[g[l]];
      const uint8_t signs = Ksign(aux >> (7 * l));
      for (int j = 0; j < 8; ++j) *y++ = Signed(db * static_cast<float>(grid[j]), signs, j);
    }
  }
}

// IQ2_XS: f16 d, 32 u16 (9-bit grid index, 7-bit sign index), 8 bytes of two 4-bit scales.
void DeqIq2Xs(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* scales = b + 66;
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {d * (0.5f + static_cast<float>(scales[ib] & 0xF)) * 0.25f,
                         d * (0.5f + static_cast<float>(scales[ib] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = Load16(b + 2 + 2 * (4 * ib + l));
      const auto& grid = tables::kIq2xsGrid[v & 511];
      const uint8_t signs = Ksign(v >> 9);
      for (int j = 0; j < 8; ++j) *y++ = Signed(db[l / 2] * static_cast<float>(grid[j]), signs, j);
    }
  }
}

// IQ2_S: f16 d, 32 low index bytes, 32 explicit sign bytes, 8 bytes of 2-bit index highs,
// 8 bytes of two 4-bit scales.
void DeqIq2S(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  const uint8_t* signs = b + 34;
  const uint8_t* qh = b + 66;
  const uint8_t* scales = b + 74;
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {d * (0.5f + static_cast<float>(scales[ib] & 0xF)) * 0.25f,
                         d * (0.5f + static_cast<float>(scales[ib] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const int idx = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
      const auto& grid = tables::kIq2sGrid[idx];
      for (int j = 0; j < 8; ++j)
        *y++ = Signed(db[l / 2] * static_cast<float>(grid[j]), signs[4 * ib + l], j);
    }
  }
}

// IQ3_XXS: f16 d, 64 grid index bytes (4-wide grid), 8 u32 of sign indices + 4-bit scale.
void DeqIq3Xxs(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = Load32(b + 66 + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = Ksign(aux >> (7 * l));
      const auto& g1 = tables::kIq3xxsGrid[qs[2 * l]];
      const auto& g2 = tables::kIq3xxsGrid[qs[2 * l + 1]];
      for (int j = 0; j < 4; ++j) y[j] = Signed(db * static_cast<float>(g1[j]), signs, j);
      for (int j = 0; j < 4; ++j) y[j + 4] = Signed(db * static_cast<float>(g2[j]), signs, j + 4);
      y += 8;
    }
    qs += 8;
  }
}

// IQ3_S: f16 d, 64 low index bytes, 8 bytes of index high bits, 32 sign bytes, 4 scale bytes.
void DeqIq3S(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  const uint8_t* qh = b + 66;
  const uint8_t* signs = b + 74;
  const uint8_t* scales = b + 106;
  for (int ib = 0; ib < 8; ++ib) {
    const int s = ib % 2 == 0 ? (scales[ib / 2] & 0xF) : (scales[ib / 2] >> 4);
    const float db = d * static_cast<float>(1 + 2 * s);
    for (int l = 0; l < 4; ++l) {
      const auto& g1 = tables::kIq3sGrid[qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)];
      const auto& g2 = tables::kIq3sGrid[qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)];
      for (int j = 0; j < 4; ++j) y[j] = Signed(db * static_cast<float>(g1[j]), signs[l], j);
      for (int j = 0; j < 4; ++j)
        y[j + 4] = Signed(db * static_cast<float>(g2[j]), signs[l], j + 4);
      y += 8;
    }
    qs += 8;
    signs += 4;
  }
}

// IQ1_S: f16 d, 32 low index bytes, 8 u16 (four 3-bit index highs, 3-bit scale, delta sign).
void DeqIq1S(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t qh = Load16(b + 34 + 2 * ib);
    const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    const float delta = (qh & 0x8000) ? -tables::kIq1Delta : tables::kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const auto& grid = tables::kIq1sGrid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; ++j) *y++ = dl * (static_cast<float>(grid[j]) + delta);
    }
    qs += 4;
  }
}

// IQ1_M: 32 low index bytes, 16 bytes (two 3-bit index highs + delta sign per byte), 8 bytes
// of 3-bit scales whose top nibbles of the four u16 words together hold the f16 d.
void DeqIq1M(const uint8_t* b, float* y) {
  const uint8_t* qs = b;
  const uint8_t* qh = b + 32;
  uint16_t sc[4];
  for (int i = 0; i < 4; ++i) sc[i] = Load16(b + 48 + 2 * i);
  const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                               ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = HalfToFloat(dbits);
  for (int ib = 0; ib < 8; ++ib) {
    const int shift = 6 * (ib % 2);
    const float dl1 = d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1);
    const float dl2 = d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
    const int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                        qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
    const uint8_t dbits4[4] = {
        static_cast<uint8_t>(qh[0] & 0x08), static_cast<uint8_t>(qh[0] & 0x80),
        static_cast<uint8_t>(qh[1] & 0x08), static_cast<uint8_t>(qh[1] & 0x80)};
    for (int l = 0; l < 4; ++l) {
      const float delta = dbits4[l] ? -tables::kIq1Delta : tables::kIq1Delta;
      const float dl = l < 2 ? dl1 : dl2;
      const auto& grid = tables::kIq1sGrid[idx[l]];
      for (int j = 0; j < 8; ++j) *y++ = dl * (static_cast<float>(grid[j]) + delta);
    }
    qs += 4;
    qh += 2;
  }
}

// IQ4_XS: f16 d, u16 of 2-bit scale highs, 4 bytes of 4-bit scale lows, 128 bytes nibbles.
void DeqIq4Xs(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint16_t scales_h = Load16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls =
        ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(tables::kIq4nlValues[qs[j] & 0xF]);
      y[j + 16] = dl * static_cast<float>(tables::kIq4nlValues[qs[j] >> 4]);
    }
    y += 32;
    qs += 16;
  }
}

}  // namespace

BlockDequantFn IqDequant(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
      return DeqIq2Xxs;
    case DType::IQ2_XS:
      return DeqIq2Xs;
    case DType::IQ2_S:
      return DeqIq2S;
    case DType::IQ3_XXS:
      return DeqIq3Xxs;
    case DType::IQ3_S:
      return DeqIq3S;
    case DType::IQ1_S:
      return DeqIq1S;
    case DType::IQ1_M:
      return DeqIq1M;
    case DType::IQ4_XS:
      return DeqIq4Xs;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

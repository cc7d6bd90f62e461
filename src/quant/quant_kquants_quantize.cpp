// Importance-free quantization to the K-quant formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
// Per sub-block a weighted least-squares fit picks the scale (and min for the affine types)
// among a small fixed set of candidate grids; the sub-block scales are then quantized against
// one f16 super-block scale and the values re-quantized with the scales actually stored.
#include <algorithm>
#include <cmath>

#include "quant/quant_internal.h"

namespace lockstep::quant::detail {
namespace {

inline int Nearest(float v) {
  return static_cast<int>(std::lrint(v));
}
inline int Clamp(int v, int lo, int hi) {
  return std::min(hi, std::max(lo, v));
}

// Affine fit x ~ scale*L - mn with L in [0, nmax], mn >= 0. Weights favour large magnitudes.
void FitAffine(const float* x, int n, int nmax, float* scale, float* mn) {
  float lo = x[0], hi = x[0], sum2 = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum2 += x[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *scale = 0;
    *mn = -lo;
    return;
  }
  const float av = std::sqrt(sum2 / static_cast<float>(n));
  float best_err = INFINITY, best_scale = (hi - lo) / static_cast<float>(nmax), best_min = lo;
  for (int step = 0; step <= 20; ++step) {
    const float iscale =
        (static_cast<float>(nmax) - 1.0f + 0.1f * static_cast<float>(step)) / (hi - lo);
    double sw = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(Nearest(iscale * (x[i] - lo)), 0, nmax);
      const double w = av + std::fabs(x[i]);
      sw += w;
      sl += w * l;
      sl2 += w * l * l;
      sx += w * x[i];
      sxl += w * x[i] * l;
    }
    const double det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    double s = (sw * sxl - sx * sl) / det;
    double m = (sl2 * sx - sl * sxl) / det;
    if (m > 0) {
      m = 0;
      s = sxl / sl2;
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(Nearest(static_cast<float>((x[i] - m) / s)), 0, nmax);
      const double diff = s * l + m - x[i];
      err += (av + std::fabs(x[i])) * diff * diff;
    }
    if (err < best_err) {
      best_err = err;
      best_scale = static_cast<float>(s);
      best_min = static_cast<float>(m);
    }
  }
  *scale = best_scale;
  *mn = -best_min;
}

// Symmetric fit x ~ scale*L with L in [-nmax, nmax-1]; weights x^2. Returns a signed scale.
float FitSymmetric(const float* x, int n, int nmax) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  if (amax < 1e-30f) return 0;
  float best = -1, best_scale = -vmax / static_cast<float>(nmax);
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / vmax;
    double sxl = 0, sl2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(Nearest(iscale * x[i]), -nmax, nmax - 1);
      const double w = static_cast<double>(x[i]) * x[i];
      sxl += w * x[i] * l;
      sl2 += w * l * l;
    }
    if (sl2 > 0 && sxl * sxl / sl2 > best) {
      best = static_cast<float>(sxl * sxl / sl2);
      best_scale = static_cast<float>(sxl / sl2);
    }
  }
  return best_scale;
}

// Quantizes non-negative sub-block values v[] to integers in [0, qmax] against a super-block
// scale stored as f16; returns the stored (f16-rounded) super scale.
float QuantizeScales(const float* v, int count, int qmax, uint8_t* q, uint8_t* out_half) {
  float vmax = 0;
  for (int i = 0; i < count; ++i) vmax = std::max(vmax, v[i]);
  const float inv = vmax > 0 ? static_cast<float>(qmax) / vmax : 0.0f;
  for (int i = 0; i < count; ++i) q[i] = static_cast<uint8_t>(Clamp(Nearest(inv * v[i]), 0, qmax));
  StoreHalf(out_half, vmax / static_cast<float>(qmax));
  return LoadHalf(out_half);
}

// Fits the affine sub-blocks of a super-block and writes scales; returns the final levels.
void AffineSuperBlock(const float* x, int sub, int nmax, int qmax, uint8_t* ls, uint8_t* lm,
                      uint8_t* d_half, uint8_t* dmin_half, int* levels) {
  const int nsub = 256 / sub;
  float scales[16], mins[16];
  for (int s = 0; s < nsub; ++s) FitAffine(x + s * sub, sub, nmax, &scales[s], &mins[s]);
  const float d = QuantizeScales(scales, nsub, qmax, ls, d_half);
  const float dmin = QuantizeScales(mins, nsub, qmax, lm, dmin_half);
  for (int s = 0; s < nsub; ++s) {
    const float dl = d * static_cast<float>(ls[s]), ml = dmin * static_cast<float>(lm[s]);
    for (int i = 0; i < sub; ++i) {
      const int idx = s * sub + i;
      levels[idx] = dl > 0 ? Clamp(Nearest((x[idx] + ml) / dl), 0, nmax) : 0;
    }
  }
}

// Fits symmetric sub-blocks of 16; writes signed 6/8-bit sub-scales, returns final levels
// (offset so they are non-negative: level + nmax).
void SymmetricSuperBlock(const float* x, int nmax, int smax, int8_t* ls, uint8_t* d_half,
                         int* levels) {
  float scales[16], amax = 0, vmax = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s] = FitSymmetric(x + 16 * s, 16, nmax);
    if (std::fabs(scales[s]) > amax) {
      amax = std::fabs(scales[s]);
      vmax = scales[s];
    }
  }
  const float iscale = vmax != 0 ? -static_cast<float>(smax) / vmax : 0.0f;
  for (int s = 0; s < 16; ++s)
    ls[s] = static_cast<int8_t>(Clamp(Nearest(iscale * scales[s]), -smax, smax - 1));
  StoreHalf(d_half, iscale != 0 ? 1.0f / iscale : 0.0f);
  const float d = LoadHalf(d_half);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(ls[s]);
    for (int i = 0; i < 16; ++i) {
      const int idx = 16 * s + i;
      const int l = dl != 0 ? Clamp(Nearest(x[idx] / dl), -nmax, nmax - 1) : 0;
      levels[idx] = l + nmax;
    }
  }
}

// 2-bit planes: byte l of each 32-byte group holds elements l, l+32, l+64, l+96.
void Pack2BitPlanes(const int* levels, uint8_t* qs) {
  for (int j = 0; j < 256; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>((levels[j + l] & 3) | ((levels[j + l + 32] & 3) << 2) |
                               ((levels[j + l + 64] & 3) << 4) | ((levels[j + l + 96] & 3) << 6));
}

void QuantQ2_K(const float* x, uint8_t* b) {
  uint8_t ls[16], lm[16];
  int levels[256];
  AffineSuperBlock(x, 16, 3, 15, ls, lm, b + 80, b + 82, levels);
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(ls[s] | (lm[s] << 4));
  Pack2BitPlanes(levels, b + 16);
}

void QuantQ3_K(const float* x, uint8_t* b) {
  int8_t ls[16];
  int levels[256];
  SymmetricSuperBlock(x, 4, 32, ls, b + 108, levels);
  std::memset(b, 0, 32);  // hmask
  for (int j = 0; j < 256; ++j)
    if (levels[j] > 3) b[j % 32] = static_cast<uint8_t>(b[j % 32] | (1 << (j / 32)));
  Pack2BitPlanes(levels, b + 32);
  uint8_t* s = b + 96;
  std::memset(s, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = ls[j] + 32;
    if (j < 8)
      s[j] = static_cast<uint8_t>(l & 0xF);
    else
      s[j - 8] = static_cast<uint8_t>(s[j - 8] | ((l & 0xF) << 4));
    s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
  }
}

// Packs eight 6-bit scale/min pairs into the 12-byte Q4_K/Q5_K layout.
void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = static_cast<uint8_t>(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

void QuantQ4_K(const float* x, uint8_t* b) {
  uint8_t ls[8], lm[8];
  int levels[256];
  AffineSuperBlock(x, 32, 15, 63, ls, lm, b, b + 2, levels);
  PackScaleMinK4(ls, lm, b + 4);
  for (int j = 0; j < 256; j += 64)
    for (int l = 0; l < 32; ++l)
      b[16 + j / 2 + l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
}

void QuantQ5_K(const float* x, uint8_t* b) {
  uint8_t ls[8], lm[8];
  int levels[256];
  AffineSuperBlock(x, 32, 31, 63, ls, lm, b, b + 2, levels);
  PackScaleMinK4(ls, lm, b + 4);
  uint8_t* qh = b + 16;
  uint8_t* ql = b + 48;
  std::memset(qh, 0, 32);
  for (int n = 0, pair = 0; n < 256; n += 64, ++pair) {
    for (int j = 0; j < 32; ++j) {
      const int l1 = levels[n + j], l2 = levels[n + j + 32];
      if (l1 > 15) qh[j] = static_cast<uint8_t>(qh[j] | (1 << (2 * pair)));
      if (l2 > 15) qh[j] = static_cast<uint8_t>(qh[j] | (2 << (2 * pair)));
      ql[j] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
    }
    ql += 32;
  }
}

void QuantQ6_K(const float* x, uint8_t* b) {
  int8_t ls[16];
  int levels[256];
  SymmetricSuperBlock(x, 32, 128, ls, b + 208, levels);
  std::memcpy(b + 192, ls, 16);
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int* L = levels + j + l;
      ql[l] = static_cast<uint8_t>((L[0] & 0xF) | ((L[64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((L[32] & 0xF) | ((L[96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((L[0] >> 4) | ((L[32] >> 4) << 2) | ((L[64] >> 4) << 4) |
                                   ((L[96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace

BlockQuantFn KQuantQuant(DType t) {
  switch (t) {
    case DType::Q2_K:
      return QuantQ2_K;
    case DType::Q3_K:
      return QuantQ3_K;
    case DType::Q4_K:
      return QuantQ4_K;
    case DType::Q5_K:
      return QuantQ5_K;
    case DType::Q6_K:
      return QuantQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace lockstep::quant::detail

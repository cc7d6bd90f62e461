// PrepareRow / DotRow / DotCols: activation preparation and the run-time choice of dot kernels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/check.h"
#include "quant/dot_internal.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

namespace lockstep::quant {
namespace {

// lround for |v| < 2^31: truncate, then step away from zero when the dropped fraction is at
// least one half (v - trunc(v) is exact). Inline and branch-free, so the per-row activation
// quantization vectorizes instead of calling libm per element.
inline int RoundHalfAway(float v) {
  const int t = static_cast<int>(v);
  const float f = v - static_cast<float>(t);
  return t + (f >= 0.5f) - (f <= -0.5f);
}

// Q8 levels of a block: scale amax/127, round half away from zero. Computed once per row in
// portable code, so every kernel sees the same activation bytes.
void QuantizeQ8Block(const float* x, int n, float* d_out, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  float id;
  const float d = detail::Q8Scale(amax, &id);
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(RoundHalfAway(x[i] * id));
  *d_out = d;
}

void PrepareQ8x32(Isa isa, const float* x, int64_t n, std::vector<uint8_t>* out) {
  CHECKF(n % 32 == 0, "PrepareRow: {} elements is not a multiple of 32", n);
  out->resize(static_cast<size_t>(n / 32) * detail::kQ8x32Bytes);
  if (isa >= Isa::kAvx2) return detail::PrepareQ8x32Avx2(x, n / 32, out->data());
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* blk = out->data() + b * detail::kQ8x32Bytes;
    float d;
    QuantizeQ8Block(x + b * 32, 32, &d, reinterpret_cast<int8_t*>(blk + 4));
    std::memcpy(blk, &d, 4);
  }
}

void PrepareQ8x256(Isa isa, const float* x, int64_t n, std::vector<uint8_t>* out) {
  CHECKF(n % 256 == 0, "PrepareRow: {} elements is not a multiple of 256", n);
  out->resize(static_cast<size_t>(n / 256) * detail::kQ8x256Bytes);
  if (isa >= Isa::kAvx2) return detail::PrepareQ8x256Avx2(x, n / 256, out->data());
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out->data() + b * detail::kQ8x256Bytes;
    auto* q = reinterpret_cast<int8_t*>(blk + 4);
    float d;
    QuantizeQ8Block(x + b * 256, 256, &d, q);
    std::memcpy(blk, &d, 4);
    for (int g = 0; g < 16; ++g) {
      int16_t s = 0;
      for (int i = 0; i < 16; ++i) s = static_cast<int16_t>(s + q[16 * g + i]);
      std::memcpy(blk + 260 + 2 * g, &s, 2);
    }
  }
}

// Generic path: expand the weight row, then the canonical f32 dot.
float GenericDot(const void* w_row, const PreparedRow& x) {
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(x.n));
  DequantizeRow(x.wtype, w_row, w.data(), x.n);
  return DotF32(w.data(), x.f32.data(), x.n);
}

void PrepareRowAt(Isa isa, DType wtype, const float* x, int64_t n, PreparedRow* out) {
  out->wtype = wtype;
  out->n = n;
  switch (detail::ActivationFormat(wtype)) {
    case detail::ActFormat::kQ8x32:
      out->f32.clear();
      PrepareQ8x32(isa, x, n, &out->q);
      return;
    case detail::ActFormat::kQ8x256:
      out->f32.clear();
      PrepareQ8x256(isa, x, n, &out->q);
      return;
    case detail::ActFormat::kF32:
      out->q.clear();
      out->f32.assign(x, x + n);
      return;
  }
}

}  // namespace

void PrepareRow(DType wtype, const float* x, int64_t n, PreparedRow* out) {
  PrepareRowAt(CpuIsa(), wtype, x, n, out);
}

void PrepareRowIsa(Isa isa, DType wtype, const float* x, int64_t n, PreparedRow* out) {
  CHECKF(CpuHasIsa(isa), "PrepareRow: this CPU lacks {}", IsaName(isa));
  PrepareRowAt(isa, wtype, x, n, out);
}

namespace {

bool CpuSupports(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return CpuSupports(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

// LOCKSTEP_ISA=portable|avx2|avx512 caps the level every kernel uses, so that one machine runs
// the paths a smaller CPU would take (scripts/test.sh runs the exactness tests under each cap).
// Read once: the level never changes within a process.
Isa IsaCap() {
  static const Isa cap = [] {
    const char* env = std::getenv("LOCKSTEP_ISA");
    if (env == nullptr || *env == 0) return Isa::kAvx512;
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512})
      if (IsaName(isa) == env) return isa;
    std::fprintf(stderr, "lockstep: LOCKSTEP_ISA=%s is not portable, avx2 or avx512; ignored\n",
                 env);
    return Isa::kAvx512;
  }();
  return cap;
}

}  // namespace

bool CpuHasIsa(Isa isa) {
  return isa <= IsaCap() && CpuSupports(isa);
}

Isa CpuIsa() {
  static const Isa best = CpuHasIsa(Isa::kAvx512) ? Isa::kAvx512
                          : CpuHasIsa(Isa::kAvx2) ? Isa::kAvx2
                                                  : Isa::kPortable;
  return best;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return "portable";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

detail::Kernel LevelKernel(Isa isa, DType t) {
  switch (isa) {
    case Isa::kPortable:
      return {detail::PortableDot(t), nullptr};
    case Isa::kAvx2:
      return detail::Avx2Kernel(t);
    case Isa::kAvx512:
      return detail::Avx512Kernel(t);
  }
  return {};
}

// Kernels per (level, type), resolved once: a level without a kernel of its own for a type
// uses the level below. Immutable after its thread-safe initialization.
struct KernelTable {
  static constexpr uint32_t kTypes = 64;
  detail::Kernel kernel[kNumIsas][kTypes];
  Isa used[kNumIsas][kTypes];
  KernelTable() {
    for (int l = 0; l < kNumIsas; ++l)
      for (uint32_t id = 0; id < kTypes; ++id) {
        used[l][id] = Isa::kPortable;
        const auto info = LookupDType(id);
        if (!info) continue;
        for (int k = l; k >= 0; --k)
          if (auto kern = LevelKernel(static_cast<Isa>(k), info->type)) {
            kernel[l][id] = kern;
            used[l][id] = static_cast<Isa>(k);
            break;
          }
      }
  }
  const detail::Kernel& For(Isa isa, DType t) const {
    const auto id = static_cast<uint32_t>(t);
    CHECKF(id < kTypes, "dot: type id {} out of range", id);
    return kernel[static_cast<int>(isa)][id];
  }
};

const KernelTable& Kernels() {
  static const KernelTable table;
  return table;
}

void RunCols(const detail::Kernel& k, const void* const* w_rows, int n_cols, const PreparedRow& x,
             float* out) {
  CHECKF(n_cols >= 1 && n_cols <= kMaxDotCols, "DotCols: {} columns", n_cols);
  const auto* const* w = reinterpret_cast<const uint8_t* const*>(w_rows);
  if (k.cols != nullptr) return k.cols(w, n_cols, x, out);
  for (int c = 0; c < n_cols; ++c) out[c] = k.row ? k.row(w[c], x) : GenericDot(w[c], x);
}

}  // namespace

Isa KernelIsa(Isa isa, DType t) {
  return Kernels().used[static_cast<int>(isa)][static_cast<uint32_t>(t) % KernelTable::kTypes];
}

float DotRow(const void* w_row, const PreparedRow& x) {
  const detail::Kernel& k = Kernels().For(CpuIsa(), x.wtype);
  if (k.row != nullptr) return k.row(static_cast<const uint8_t*>(w_row), x);
  float out;
  RunCols(k, &w_row, 1, x, &out);
  return out;
}

int StreamedDotCols() {
  return CpuIsa() == Isa::kAvx512 ? 1 : kMaxDotCols;
}

void DotCols(const void* const* w_rows, int n_cols, const PreparedRow& x, float* out) {
  RunCols(Kernels().For(CpuIsa(), x.wtype), w_rows, n_cols, x, out);
}

void DotF32Cols(const float* const* a, int n_cols, const float* b, int64_t n, float* out) {
  CHECKF(n_cols >= 1 && n_cols <= kMaxDotCols, "DotF32Cols: {} columns", n_cols);
  if (CpuIsa() >= Isa::kAvx2) return detail::DotF32ColsAvx2(a, n_cols, b, n, out);
  for (int c = 0; c < n_cols; ++c) out[c] = DotF32(a[c], b, n);
}

void DotF32Block(const float* const* keys, const float* const* queries, int n_queries, int64_t n,
                 float* const* out) {
  DotF32BlockIsa(CpuIsa(), keys, queries, n_queries, n, out);
}

void DotF32BlockIsa(Isa isa, const float* const* keys, const float* const* queries, int n_queries,
                    int64_t n, float* const* out) {
  CHECKF(CpuHasIsa(isa), "DotF32Block: this CPU lacks {}", IsaName(isa));
  CHECKF(n_queries >= 1 && n_queries <= kMaxDotQueries, "DotF32Block: {} queries", n_queries);
  if (isa == Isa::kAvx512) return detail::DotF32BlockAvx512(keys, queries, n_queries, n, out);
  if (isa == Isa::kAvx2) return detail::DotF32BlockAvx2(keys, queries, n_queries, n, out);
  for (int q = 0; q < n_queries; ++q)
    for (int c = 0; c < kMaxDotCols; ++c) out[q][c] = DotF32(keys[c], queries[q], n);
}

void AddWeightedRows(const float* const* rows, int n_rows, const float* const* w, int n_acc,
                     int64_t n, float* const* acc) {
  AddWeightedRowsIsa(CpuIsa(), rows, n_rows, w, n_acc, n, acc);
}

void AddWeightedRowsIsa(Isa isa, const float* const* rows, int n_rows, const float* const* w,
                        int n_acc, int64_t n, float* const* acc) {
  CHECKF(CpuHasIsa(isa), "AddWeightedRows: this CPU lacks {}", IsaName(isa));
  CHECKF(n_acc >= 1 && n_acc <= kMaxWeightedAccs, "AddWeightedRows: {} accumulators", n_acc);
  if (isa == Isa::kAvx512) return detail::AddWeightedRowsAvx512(rows, n_rows, w, n_acc, n, acc);
  if (isa == Isa::kAvx2) return detail::AddWeightedRowsAvx2(rows, n_rows, w, n_acc, n, acc);
  for (int q = 0; q < n_acc; ++q)
    for (int t = 0; t < n_rows; ++t)
      for (int64_t i = 0; i < n; ++i) acc[q][i] += w[q][t] * rows[t][i];
}

void DotColsIsa(Isa isa, const void* const* w_rows, int n_cols, const PreparedRow& x, float* out) {
  CHECKF(CpuHasIsa(isa), "dot: this CPU lacks {}", IsaName(isa));
  RunCols(Kernels().For(isa, x.wtype), w_rows, n_cols, x, out);
}

}  // namespace lockstep::quant

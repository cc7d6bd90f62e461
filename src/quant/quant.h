// GGUF block formats: dequantization, quantization and the per-row dot products the CPU
// matmul is built on. Every function here reduces in an order fixed by the row alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace lockstep::quant {

// True when DequantizeRow supports `t`.
bool CanDequantize(DType t);
// Expands `n` elements (a whole number of blocks) of type `t` to float32.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// True when QuantizeRow supports `t`.
bool CanQuantize(DType t);
// Quantizes `n` floats (a whole number of blocks) into `dst` (RowBytes(t, n) bytes).
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// The activation side of a dot product against weights of type `wtype`. A row of activations
// is prepared once (for integer-dot types it is quantized per row, never across rows) and then
// dotted against many weight rows.
struct PreparedRow {
  DType wtype = DType::F32;
  int64_t n = 0;
  std::vector<float> f32;  // used by float weight types and the generic path
  std::vector<uint8_t> q;  // used by integer-dot paths
};
void PrepareRow(DType wtype, const float* x, int64_t n, PreparedRow* out);

// dot(w_row, x) for one weight row of type `wtype`. The result is a pure function of the two
// rows' bytes: the same on any batch, thread count or call site.
float DotRow(const void* w_row, const PreparedRow& x);

// DotRow restricted to the portable kernels (tests compare it with DotRow bit for bit).
float DotRowPortable(const void* w_row, const PreparedRow& x);
// True when DotRow uses an AVX2 kernel for weights of type `t` on this CPU.
bool DotRowUsesAvx2(DType t);

// f32 x f32 dot in lockstep's canonical order (8 interleaved partial sums, then a fixed tree).
float DotF32(const float* a, const float* b, int64_t n);

}  // namespace lockstep::quant

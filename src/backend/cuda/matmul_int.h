// Launchers of the integer matmul path: the CPU's quantized dot (quant/dot_internal.h) on the
// GPU. Activation rows are quantized to Q8 blocks exactly as quant::PrepareRow does, each weight
// block's integer sums are exact (any order gives the same integers), and the float
// contributions are added in the CPU's order (block b into partial b % 8, then the fixed tree).
// So a row's outputs are bit-identical to quant::DotRow's, whatever the launch shape.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul.h"
#include "core/dtype.h"

namespace lockstep::backend::cuda {

// Quantized activation rows, structure of arrays (16-byte aligned int8 levels): row r's levels
// q[r * k ...], block scales d[r * (k / kElems) ...], and for 256-element blocks the sums of
// each 16 levels bsum[r * (k / 16) ...] (quant::PrepareRow's Q8x32 / Q8x256 blocks).
struct ActRows {
  const int8_t* q;
  const float* d;
  const int16_t* bsum;
  int64_t k;
};

// The device layout behind an `act` scratch of IntActivationBytes for activation blocks of
// `elems` (32 or 256) values: levels, then scales, then (256 only) 16-level sums, each section
// 16-byte aligned. QuantizeActivations and the norm that quantizes its output (norm.h) write it.
struct ActLayout {
  size_t q_bytes, d_bytes, bsum_bytes;
  ActLayout(int elems, int64_t rows, int64_t k)
      : q_bytes(Align(static_cast<size_t>(rows * k))),
        d_bytes(Align(static_cast<size_t>(rows * (k / elems)) * sizeof(float))),
        bsum_bytes(elems == 256 ? Align(static_cast<size_t>(rows * (k / 16)) * sizeof(int16_t))
                                : 0) {}
  static size_t Align(size_t n) { return (n + 15) & ~size_t{15}; }
  size_t total() const { return q_bytes + d_bytes + bsum_bytes; }
  int8_t* Q(void* act) const { return static_cast<int8_t*>(act); }
  float* D(void* act) const {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(act) + q_bytes);
  }
  int16_t* Bsum(void* act) const {
    return reinterpret_cast<int16_t*>(static_cast<uint8_t*>(act) + q_bytes + d_bytes);
  }
  ActRows View(void* act, int64_t k) const { return {Q(act), D(act), Bsum(act), k}; }
};

// True when `t` runs on the integer path (else the float kernels of matmul.cu).
bool HasIntegerPath(DType t);

// Device bytes the quantized copy of `rows` activation rows of length k needs for weights of
// type `t` (the caller's scratch; 0 for types off the integer path).
size_t IntActivationBytes(DType t, int64_t rows, int64_t k);

// The activation block length of an integer-path type (32 or 256; 0 off the path): weights
// whose types share it (and the input length) can share one quantized copy of the input.
int IntActivationBlock(DType t);

// IntActivationBytes for an activation block length (32 or 256) instead of a type.
size_t ActivationBytes(int block, int64_t rows, int64_t k);

// Quantizes `rows` rows of x [rows, k] into `act` (IntActivationBytes(type, rows, k)) as weights
// of `type` read them.
ActRows QuantizeActivations(DType type, const float* x, int64_t rows, int64_t k, void* act,
                            cudaStream_t stream);

// y = x · Wᵀ from activations QuantizeActivations made for a type of the same block length.
// `split`: rows x n_out floats of scratch exactly where SplitsIntMma (matmul_mma.h), else null.
void LaunchIntMatMulQuantized(DType type, const void* w, int64_t row_bytes, int64_t n_out,
                              const ActRows& xq, int64_t rows, float* y, float* split,
                              cudaStream_t stream);

// y = x · Wᵀ as LaunchMatMul, for HasIntegerPath(type); `act` holds IntActivationBytes.
void LaunchIntMatMul(DType type, const void* w, int64_t row_bytes, int64_t k, int64_t n_out,
                     const float* x, int64_t rows, float* y, void* act, cudaStream_t stream);

// The gathered form (GatheredMatMul's contract) for HasIntegerPath(m.type); `act` holds
// IntActivationBytes(m.type, m.tasks / m.x_div rounded up, m.k).
void LaunchIntGatheredMatMul(const GatheredMatMul& m, void* act, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

// Weights repacked at load for the multi-column kernels: 16 weight rows interleaved per block so
// that one vector load gives the same dword of every row (no gathers, one sequential stream).
// The bytes are the GGUF blocks' own (same levels, scales and minimums), only moved, so every
// output still equals DotRow's bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/threadpool.h"
#include "quant/quant.h"

namespace lockstep::quant {

// Weight rows per packed group: one per int32 lane of a 512-bit vector.
inline constexpr int kPackedCols = 16;

// A weight matrix (n_rows rows of k elements, type `type`) in packed groups of kPackedCols
// rows. Group g, packing unit b (one block, or two: PackedUnitElems) holds, for each of the
// type's kernel dwords m, dword m of rows 16 g .. 16 g + 15 side by side (64 bytes); the groups
// are contiguous, so the rows of one output column block are read as one stream. The last group
// repeats its last row to fill up.
class PackedMatrix {
 public:
  DType type() const { return type_; }
  int64_t n_rows() const { return n_rows_; }
  int64_t k() const { return k_; }
  int64_t n_groups() const { return (n_rows_ + kPackedCols - 1) / kPackedCols; }
  // Packing units along k (k / PackedUnitElems(type)), kept so a kernel call needs no layout.
  int64_t n_units() const { return n_units_; }
  size_t group_bytes() const { return group_bytes_; }
  size_t bytes() const { return group_bytes_ * static_cast<size_t>(n_groups()); }
  const uint8_t* group(int64_t g) const {
    return data_.get() + static_cast<size_t>(g) * group_bytes_;
  }

 private:
  friend std::unique_ptr<PackedMatrix> PackIsa(Isa, DType, const void*, size_t, int64_t, int64_t,
                                               ThreadPool*);
  DType type_ = DType::F32;
  int64_t n_rows_ = 0, k_ = 0, n_units_ = 0;
  size_t group_bytes_ = 0;
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> data_{nullptr, nullptr};
};

// True when this CPU's level has packed kernels for `t` (AVX-512 with VNNI and AVX2: Q4_K,
// Q5_K, Q6_K, Q8_0, Q4_0, IQ4_XS, MXFP4; both levels read the same packed bytes).
bool CanPack(DType t);
// Elements per packing unit of `t`: its block size, or two blocks (Q4_0 and MXFP4, whose 18- and
// 17-byte blocks pack in pairs). A packed matrix's k is a multiple of it.
int64_t PackedUnitElems(DType t);
// The same at level `isa`: false where the CPU lacks `isa` (tests run every level it has).
bool CanPackIsa(Isa isa, DType t);
// The packed copy of `n_rows` rows of `row_bytes` bytes (k elements each) of type `t`, or null
// when CanPack(t) is false or k is not a whole number of packing units.
// `pool`, when given, packs groups on its threads (the same bytes).
std::unique_ptr<PackedMatrix> Pack(DType t, const void* w, size_t row_bytes, int64_t n_rows,
                                   int64_t k, ThreadPool* pool = nullptr);
// Pack with level `isa`'s packing code (CanPackIsa(isa, t) must hold): the same bytes at every
// level.
std::unique_ptr<PackedMatrix> PackIsa(Isa isa, DType t, const void* w, size_t row_bytes,
                                      int64_t n_rows, int64_t k, ThreadPool* pool = nullptr);

// out[r * out_stride + c] = DotRow(row 16 g + c, x[r]) for r < n_rows and c < n_cols
// (1..kPackedCols), bit for bit, for any n_rows >= 1. Every x[r] is prepared for the matrix's
// type and length.
void DotPacked(const PackedMatrix& m, int64_t g, int n_cols, const PreparedRow* x, int64_t n_rows,
               float* out, int64_t out_stride);
// DotPacked with level `isa`'s kernel (CanPackIsa(isa, m.type()) must hold): tests hold every
// level the CPU runs to the same bits.
void DotPackedIsa(Isa isa, const PackedMatrix& m, int64_t g, int n_cols, const PreparedRow* x,
                  int64_t n_rows, float* out, int64_t out_stride);

}  // namespace lockstep::quant

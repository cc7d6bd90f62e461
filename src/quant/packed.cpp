// Packing weight matrices into 16-row groups (quant/packed.h) and the run-time choice of the
// packed kernels.
#include "quant/packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "core/check.h"
#include "quant/dot_internal.h"

namespace lockstep::quant {
namespace {

// Where each dword the type's packed kernel reads sits in its GGUF block (every dword a kernel
// needs, in the order it reads them; see dot_packed_avx512.cpp). n_dwords 0: not packable.
detail::PackLayout LayoutOf(DType t) {
  detail::PackLayout l;
  l.block_bytes = static_cast<int>(Info(t).type_size);  // times unit_blocks, below
  switch (t) {
    case DType::Q4_K:  // the block's 36 dwords as they are
      l.n_dwords = 36;
      for (int m = 0; m < 36; ++m) l.offset[m] = 4 * m;
      break;
    case DType::Q6_K:  // ql, qh and scales whole; d is the high half of the dword at 206
      l.n_dwords = 53;
      for (int m = 0; m < 53; ++m) l.offset[m] = m < 52 ? 4 * m : 206;
      break;
    case DType::Q8_0:  // d (low half of the dword at 0), then the 32 levels from byte 2
      l.n_dwords = 9;
      for (int m = 0; m < 9; ++m) l.offset[m] = m == 0 ? 0 : 2 + 4 * (m - 1);
      break;
    case DType::Q5_K:  // the block's 44 dwords as they are (d/dmin, scales, qh, qs)
      l.n_dwords = 44;
      for (int m = 0; m < 44; ++m) l.offset[m] = 4 * m;
      break;
    case DType::Q4_0:  // two 18-byte blocks: d0 | d1 << 16, then each block's 16 bytes of nibbles
      l.unit_blocks = 2;
      l.n_dwords = 9;
      l.offset[0] = 0;
      l.hi_offset[0] = 18;
      for (int m = 1; m < 9; ++m) l.offset[m] = (m < 5 ? 2 : 20) + 4 * ((m - 1) % 4);
      break;
    case DType::IQ4_XS:  // the block's 34 dwords as they are (d/scales_h, scales_l, qs)
      l.n_dwords = 34;
      for (int m = 0; m < 34; ++m) l.offset[m] = 4 * m;
      break;
    case DType::MXFP4:  // two 17-byte blocks: e0 in byte 0, e1 in byte 2, then the nibbles
      l.unit_blocks = 2;
      l.n_dwords = 9;
      l.offset[0] = 0;
      l.hi_offset[0] = 17;
      for (int m = 1; m < 9; ++m) l.offset[m] = (m < 5 ? 1 : 18) + 4 * ((m - 1) % 4);
      break;
    default:
      break;
  }
  l.block_bytes *= l.unit_blocks;
  return l;
}

// Level `isa`'s packed kernel for `t` (nullptr: none) and its packing code.
detail::PackedFn KernelFor(Isa isa, DType t) {
  switch (isa) {
    case Isa::kAvx512:
      return detail::Avx512Packed(t);
    case Isa::kAvx2:
      return detail::Avx2Packed(t);
    default:
      return nullptr;
  }
}
using PackGroupFn = void (*)(const uint8_t*, const int32_t*, const detail::PackLayout&, int64_t,
                             uint8_t*);
PackGroupFn PackerFor(Isa isa) {
  return isa == Isa::kAvx512 ? detail::Avx512PackGroup : detail::Avx2PackGroup;
}

void Run(Isa isa, const PackedMatrix& m, int64_t g, int n_cols, const PreparedRow* x,
         int64_t n_rows, float* out, int64_t out_stride) {
  CHECKF(g >= 0 && g < m.n_groups() && n_cols >= 1 && n_cols <= kPackedCols && n_rows >= 1,
         "DotPacked: group {} of {}, {} columns, {} rows", g, m.n_groups(), n_cols, n_rows);
  CHECKF(x[0].wtype == m.type() && x[0].n == m.k(), "DotPacked: rows prepared for {} x {}",
         Name(x[0].wtype), x[0].n);
  const detail::PackedFn f = KernelFor(isa, m.type());
  CHECKF(f != nullptr, "DotPacked: no {} kernel for {}", IsaName(isa), Name(m.type()));
  f(m.group(g), m.n_units(), n_cols, x, n_rows, out, out_stride);
}

void FreeAligned(uint8_t* p) {
  std::free(p);
}

}  // namespace

int64_t PackedUnitElems(DType t) {
  return Info(t).block_size * LayoutOf(t).unit_blocks;
}

bool CanPack(DType t) {
  return KernelFor(CpuIsa(), t) != nullptr;
}

bool CanPackIsa(Isa isa, DType t) {
  return CpuHasIsa(isa) && KernelFor(isa, t) != nullptr;
}

std::unique_ptr<PackedMatrix> Pack(DType t, const void* w, size_t row_bytes, int64_t n_rows,
                                   int64_t k, ThreadPool* pool) {
  return PackIsa(CpuIsa(), t, w, row_bytes, n_rows, k, pool);
}

std::unique_ptr<PackedMatrix> PackIsa(Isa isa, DType t, const void* w, size_t row_bytes,
                                      int64_t n_rows, int64_t k, ThreadPool* pool) {
  const detail::PackLayout layout = LayoutOf(t);
  const int64_t elems = PackedUnitElems(t);
  if (!CanPackIsa(isa, t) || n_rows < 1 || k < elems || k % elems != 0) return nullptr;
  const PackGroupFn pack_group = PackerFor(isa);
  const int64_t nb = k / elems;
  CHECKF(row_bytes == static_cast<size_t>(nb * layout.block_bytes), "Pack: {} rows of {} bytes",
         Name(t), row_bytes);
  auto m = std::make_unique<PackedMatrix>();
  m->type_ = t;
  m->n_rows_ = n_rows;
  m->k_ = k;
  m->n_units_ = nb;
  const size_t block_bytes = static_cast<size_t>(layout.n_dwords) * 4 * kPackedCols;
  m->group_bytes_ = block_bytes * static_cast<size_t>(nb);
  const size_t total = m->group_bytes_ * static_cast<size_t>(m->n_groups());
  // 2 MiB-aligned and advised as huge pages: a fault and a TLB entry per 2 MiB instead of per
  // 4 KiB (d17b Q4_K_M: 1 GiB packed at load).
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = total >= kHuge ? kHuge : 64;
  const size_t alloc = (total + align - 1) / align * align;
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(align, alloc));
  CHECKF(data != nullptr, "Pack: out of memory for {} bytes", total);
  if (align == kHuge) madvise(data, alloc, MADV_HUGEPAGE);  // advice only: failure is harmless
  m->data_ = {data, FreeAligned};
  const auto* src = static_cast<const uint8_t*>(w);
  const size_t group_bytes = m->group_bytes_;
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      int32_t row_offset[kPackedCols];  // from the group's first row (the last one repeats)
      for (int c = 0; c < kPackedCols; ++c)
        row_offset[c] = static_cast<int32_t>(std::min<int64_t>(c, n_rows - 1 - g * kPackedCols) *
                                             static_cast<int64_t>(row_bytes));
      pack_group(src + g * kPackedCols * row_bytes, row_offset, layout, nb,
                 data + static_cast<size_t>(g) * group_bytes);
    }
  };
  if (pool)
    pool->ParallelFor(m->n_groups(), 16, pack_groups);
  else
    pack_groups(0, m->n_groups());
  return m;
}

void DotPacked(const PackedMatrix& m, int64_t g, int n_cols, const PreparedRow* x, int64_t n_rows,
               float* out, int64_t out_stride) {
  Run(CpuIsa(), m, g, n_cols, x, n_rows, out, out_stride);
}

void DotPackedIsa(Isa isa, const PackedMatrix& m, int64_t g, int n_cols, const PreparedRow* x,
                  int64_t n_rows, float* out, int64_t out_stride) {
  CHECKF(CpuHasIsa(isa), "DotPacked: this CPU lacks {}", IsaName(isa));
  Run(isa, m, g, n_cols, x, n_rows, out, out_stride);
}

}  // namespace lockstep::quant

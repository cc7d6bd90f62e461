// What backend ops see of one KV cache layer: storage plus the (slot, position) -> row map.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::backend {

// One cache layer as backend ops see it: storage in backend memory and the map from
// (sequence slot, position) to a storage row. Filled by kv::KvCache; backends never include
// kv/, so a device backend only needs this plain struct (the table lives in host memory on the
// CPU; a device backend would mirror it).
struct KvLayerView {
  void* k = nullptr;                               // [rows, k_width] of type_k
  void* v = nullptr;                               // [rows, v_width] of type_v
  DType type_k = DType::F32, type_v = DType::F32;  // F32, F16 or BF16
  int64_t k_width = 0, v_width = 0;
  int ring = 0;   // > 0: sliding ring, row = seq * ring + pos % ring
  int block = 0;  // ring == 0: paged, row = table[seq * table_stride + pos / block] * block + ...
  const int32_t* table = nullptr;  // block ids per slot; -1 where no block is allocated
  int table_stride = 0;
  int n_seq = 0;  // slots (for argument checks)
  int n_ctx = 0;  // max positions per slot (for argument checks)

  // Storage row of (seq, pos); -1 when a paged position has no block (a caller bug).
  int64_t Row(int seq, int pos) const {
    if (ring > 0) return static_cast<int64_t>(seq) * ring + pos % ring;
    const int32_t b = table[static_cast<int64_t>(seq) * table_stride + pos / block];
    return b < 0 ? -1 : static_cast<int64_t>(b) * block + pos % block;
  }
  // Row of positions [pos, pos + n) into rows[0, n): one modulo and lookup per ring wrap or
  // block instead of one per position (attention reads every key's row).
  void Rows(int seq, int pos, int n, int64_t* rows) const;
};

}  // namespace lockstep::backend

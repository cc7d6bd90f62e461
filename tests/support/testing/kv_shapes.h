// KV cache shapes of real Gemma 4 models, shared by the KV tests and the engine bench.
#pragma once

#include "core/dtype.h"
#include "kv/kv_cache.h"

namespace lockstep::testing {

// 26B-A4B's cache shape (/work/shared/spec/gemma4-arch.md): 30 layers, full at 5, 11, ..., 29
// with 2 kv heads of 512; sliding layers 8 kv heads of 256, window 1024; llama.cpp stores V
// beside K on the K=V full layers, and so do we (V is normalised differently from K).
inline kv::CacheConfig Gemma26bA4b(int n_ctx, DType t) {
  kv::CacheConfig c;
  for (int il = 0; il < 30; ++il) {
    const bool full = il % 6 == 5;
    const int64_t w = full ? 2 * 512 : 8 * 256;
    c.layers.push_back({true, !full, w, w});
  }
  c.n_ctx = n_ctx;
  c.sliding_keep = 1024 + 2;
  c.max_step_rows = 256;
  c.type_k = c.type_v = t;
  return c;
}

}  // namespace lockstep::testing

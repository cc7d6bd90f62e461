// Launchers of the KV-cache write and the attention kernels (paged and ring layouts).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/kv_view.h"

namespace lockstep::backend::cuda {

// Writes rows of k [rows, k_width] and v [rows, v_width] at each row's (seq, pos) storage row,
// converted to the cache's element type. kv.table must be device memory.
void LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, const int32_t* pos,
                   const int32_t* seq, int64_t rows, cudaStream_t stream);

// Causal attention of each query row over its own sequence's keys (p - window, p] (window <= 0:
// from 0; without include_self the key at p is skipped), GQA head h reading kv head
// h / (n_head / n_head_kv), scale 1, softmax accumulated in ascending key position.
// `scratch` holds AttentionScratchBytes(rows, n_head, n_head_kv, head_dim) bytes of device memory
// (the split's partial softmax states).
size_t AttentionScratchBytes(int64_t rows, int n_head, int n_head_kv, int head_dim);
// Whether a launch of `rows` query rows takes a block per tile (folding every split) rather than
// a block per (tile, split) and a merge: the same bits either way, which tests check by asking
// rows in launches of both kinds.
bool AttentionFoldsWholeTiles(int64_t rows, int n_head, int n_head_kv);
void LaunchAttention(const float* q, const KvLayerView& kv, int n_head, int n_head_kv, int head_dim,
                     int window, bool include_self, const int32_t* pos, const int32_t* seq,
                     int64_t rows, float* out, void* scratch, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

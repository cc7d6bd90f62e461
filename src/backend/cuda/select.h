// Launcher of greedy token selection on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// ids[out_index[i]] = argmax of logits row rows[i] (highest value, ties to the lowest id),
// i < n; rows and out_index are device arrays.
void LaunchArgmax(const float* logits, int64_t n_vocab, const int32_t* rows,
                  const int32_t* out_index, int64_t n, int32_t* ids, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

// Launcher of greedy token selection on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace lockstep::backend::cuda {

// Device scratch LaunchArgmax needs for n rows of n_vocab logits.
size_t ArgmaxScratchBytes(int64_t n_vocab, int64_t n);

// ids[out_index[i]] = argmax of logits row rows[i] (highest value, ties to the lowest id),
// i < n; rows and out_index are device arrays, scratch holds ArgmaxScratchBytes.
void LaunchArgmax(const float* logits, int64_t n_vocab, const int32_t* rows,
                  const int32_t* out_index, int64_t n, int32_t* ids, void* scratch,
                  cudaStream_t stream);

}  // namespace lockstep::backend::cuda

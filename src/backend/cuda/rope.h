// Launcher of NEOX rotary position embedding (with optional frequency factors).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// In place on x [rows, heads * head_dim]: pairs (i, i + n_rot/2) of every head rotate by
// pos[r] * base^(-2i/n_rot) / ff[i] (ff: device floats, or null), angle in double.
void LaunchRope(float* x, const int32_t* pos, int64_t rows, int64_t cols, int head_dim, int n_rot,
                float base, const float* ff, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

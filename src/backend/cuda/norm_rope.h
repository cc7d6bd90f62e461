// Launcher of the fused per-head RMSNorm + NEOX RoPE (a query or key projection's two ops).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// True when one warp per head can hold both values of every rotation pair (head_dim <= 512 and
// n_rot / 2 a multiple of 32), so the fused kernel applies.
bool CanFuseNormRope(int head_dim, int n_rot);

// y = rope(rmsnorm(x) * w) over heads of head_dim of x [rows, cols]: the same bits as
// LaunchRmsNorm (group head_dim, extra scale 1) followed by LaunchRope. x and y may alias.
void LaunchRmsNormRope(const float* x, const float* w, float eps, int head_dim, const int32_t* pos,
                       int n_rot, float base, const float* ff, int64_t rows, int64_t cols, float* y,
                       cudaStream_t stream);

}  // namespace lockstep::backend::cuda

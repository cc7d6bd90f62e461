// Launchers of the mixture-of-experts routing and combination kernels (the expert matmuls are
// gathered matmuls, matmul.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lockstep::backend::cuda {

// Per row: softmax over n_expert router logits, the n_used most probable experts (ties to the
// lower id) in ascending id into experts[r * n_used + s], and their weights p / sum(p) *
// scale[e] (scale: device floats or null) into weights[...].
void LaunchMoeRoute(const float* router_logits, int64_t rows, int n_expert, int n_used,
                    const float* scale, int32_t* experts, float* weights, cudaStream_t stream);

// y[r][j] = sum over s ascending of weights[r * n_used + s] * expert_out[r * n_used + s][j].
void LaunchMoeCombine(const float* expert_out, const float* weights, int64_t rows, int n_used,
                      int64_t cols, float* y, cudaStream_t stream);

}  // namespace lockstep::backend::cuda

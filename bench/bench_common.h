// Timing and byte-count helpers shared by the model benchmarks.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "model/model.h"

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Weight bytes one decode step reads: every tensor except the per-layer embedding table, of
// which a single row is gathered (token_embd is read whole: it is the tied output projection).
inline double WeightBytesPerToken(const model::Model& m) {
  double b = 0;
  for (const auto& t : m.file().tensors())
    if (t.name != "per_layer_token_embd.weight") b += static_cast<double>(t.nbytes);
  return b;
}

// f32 K and V bytes attention reads for a query at position `pos`.
inline double KvBytesPerToken(const model::ModelConfig& c, int pos) {
  double b = 0;
  for (const auto& l : c.layers) {
    const int n = l.sliding ? std::min(pos + 1, c.n_swa) : pos + 1;
    b += 2.0 * n * l.n_head_kv * l.head_dim * 4.0;
  }
  return b;
}

}  // namespace lockstep::bench

// Random-weight Gemma 4 assistant (MTP drafter) GGUF files for tests and benchmarks, pairable
// with the synthetic targets of testing/synthetic.h.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "testing/synthetic.h"

namespace lockstep::model {

struct SyntheticAssistantSpec {
  int n_vocab = 256;
  int n_bb = 64;    // target width (embedding_length_out)
  int n_embd = 48;  // drafter width
  int n_layer = 4;  // layer il is full when (il + 1) % full_every == 0; last is full
  int full_every = 4;
  int n_head = 4;
  int n_head_kv_swa = 2;  // must equal the target's cached heads / head dims
  int n_head_kv_full = 1;
  int head_dim_swa = 16;
  int head_dim_full = 32;
  float partial_rotary_full = 0.25f;
  int n_swa = 8;
  int n_ff = 64;
  bool ordered = false;  // centroid head (use_ordered_embeddings)
  int n_centroids = 16;
  int centroid_top_k = 4;
  uint64_t seed = 101;
  DType weight_type = DType::F32;
  // "Echo" drafter: when set (and n_embd == n_bb) the drafter copies this target's token_embd
  // as its LM head and passes the backbone hidden state through, so its first draft is the
  // target's own greedy choice up to `echo_noise`-scaled random layer contributions. Gives
  // realistic, mixed acceptance on random targets.
  std::string echo_target;
  float echo_noise = 0.0f;
};

// The assistant spec whose cache reads fit `target` (vocabulary, widths, KV heads, window).
SyntheticAssistantSpec AssistantSpecFor(const SyntheticSpec& target);

Status WriteSyntheticAssistant(const SyntheticAssistantSpec& spec, const std::string& path);

}  // namespace lockstep::model

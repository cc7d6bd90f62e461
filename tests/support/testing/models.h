// Test fixtures: synthetic models covering every Gemma 4 feature, written once per process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "testing/synthetic.h"

namespace lockstep::testing {

inline model::SyntheticSpec DenseSpec() {
  model::SyntheticSpec s;  // 31B-like: dense, K=V on full layers, proportional RoPE
  s.seed = 11;
  return s;
}

inline model::SyntheticSpec MoeSpec() {
  model::SyntheticSpec s;  // 26B-A4B-like: dense MLP beside routed experts
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 32;
  s.seed = 12;
  return s;
}

inline model::SyntheticSpec PleSpec() {
  model::SyntheticSpec s;  // E2B-like: per-layer embeddings and KV sharing, no K=V
  s.n_layer = 8;
  s.full_every = 4;
  s.n_embd_per_layer = 16;
  s.n_shared_kv = 3;
  s.k_eq_v = false;
  s.seed = 13;
  return s;
}

// A decode that is bound by memory bandwidth, for multi-sequence decode benchmarks: Gemma 4's
// full 262,144-token vocabulary (the tied embedding is the LM head, 768 MiB of the ~1.2 GiB F16
// file, read whole per decode step), E4B-like head dims (256 sliding, 512 full with K=V) and
// six layers, two of them full. Writes in a few seconds; never write it from a unit test.
inline model::SyntheticSpec BandwidthSpec() {
  model::SyntheticSpec s;
  s.n_vocab = 262144;
  s.n_embd = 1536;
  s.n_layer = 6;
  s.full_every = 3;  // layers 2 and 5 full
  s.n_head = 8;
  s.n_head_kv_swa = 2;
  s.n_head_kv_full = 1;
  s.head_dim_swa = 256;
  s.head_dim_full = 512;
  s.n_swa = 512;
  s.n_ff = 6144;
  s.k_eq_v = true;
  s.weight_type = DType::F16;
  s.seed = 14;
  return s;
}

// Where to write `path` before renaming it into place: unique per process, because ctest runs
// tests as parallel processes that may build the same shared fixture at the same moment (the
// contents are deterministic, so whichever rename lands last leaves the same bytes).
inline std::string ScratchPath(const std::filesystem::path& path) {
  return path.string() + ".w" + std::to_string(::getpid());
}

// Writes the model under the test temp dir (once) and returns its path.
inline std::string SyntheticPath(const std::string& name, const model::SyntheticSpec& spec) {
  const auto dir = std::filesystem::temp_directory_path() / "lockstep-tests";
  std::filesystem::create_directories(dir);
  const auto path = dir / (name + ".gguf");
  if (!std::filesystem::exists(path)) {
    const std::string scratch = ScratchPath(path);
    Status s = model::WriteSyntheticModel(spec, scratch);
    if (!s.ok()) return "";
    std::filesystem::rename(scratch, path);
  }
  return path.string();
}

}  // namespace lockstep::testing

// Random-weight Gemma 4 GGUF files for tests, benchmarks and demos: every architecture feature
// switchable by a field, values drawn from a seeded generator (the same file every time).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "quant/model_quantize.h"

namespace lockstep::model {

struct SyntheticSpec {
  int n_vocab = 256;
  int n_embd = 64;
  int n_layer = 6;
  int full_every = 3;  // layer il is full when (il + 1) % full_every == 0; last is full
  int n_head = 4;
  int n_head_kv_swa = 2;
  int n_head_kv_full = 1;
  int head_dim_swa = 16;
  int head_dim_full = 32;
  float partial_rotary_full = 0.25f;  // proportional RoPE on full layers (rope_freqs)
  int n_swa = 8;
  int n_ff = 96;
  bool k_eq_v = true;        // full layers have no attn_v
  int n_embd_per_layer = 0;  // PLE width (0 = none)
  int n_shared_kv = 0;       // trailing layers that reuse KV
  int n_expert = 0;          // 0 = dense
  int n_expert_used = 0;
  int n_ff_exp = 0;
  float softcap = 30.0f;
  uint64_t seed = 1;
  DType weight_type = DType::F32;  // F32, F16 or BF16 for matrices; norms stay F32
  // When set, each matrix is written in the type `lockstep quantize` would give it under this
  // mix (from the same values: no float file in between, which a 31B model would not fit).
  std::optional<quant::Mix> mix;
  // Block-quantized matrices get random well-formed blocks (scales of about 1/sqrt(in)/16)
  // instead of quantized values: far faster (quantizing 26B values to Q6_K/Q4_K takes minutes
  // even on 16 cores) and just as good for speed benchmarks, which read every byte anyway.
  bool random_blocks = false;
  int context_length = 4096;
};

Status WriteSyntheticModel(const SyntheticSpec& spec, const std::string& path);

// Named real-size shapes (F16 matrices); nullopt for an unknown name. "d17b": the CPU benchmark
// model of issue 15: dense, 18 layers (every sixth full), width 2048, FFN 8192, 262,144 tokens,
// K=V full layers, about 1.69B parameters. "moe4b": the CPU MoE benchmark model (issue 15's
// 128 experts, top-8, about 4B parameters): 26B-A4B's layers at width 2048, 6 layers.
// "e4b", "26b-a4b", "31b": Gemma 4's own shapes (docs: ../shared/spec/gemma4-arch.md), for the
// GPU benchmarks.
std::optional<SyntheticSpec> SyntheticPreset(std::string_view name);

// Attention and RoPE keys shared by synthetic targets and drafters, written under `prefix`
// ("gemma4." or "gemma4-assistant."). Layer il is full when (il + 1) % full_every == 0 or it is
// the last layer.
struct SyntheticAttention {
  int n_layer, full_every, n_head, n_head_kv_swa, n_head_kv_full, head_dim_swa, head_dim_full;
  int n_swa, n_shared_kv;
};
bool SyntheticLayerIsFull(int n_layer, int full_every, int il);
void WriteSyntheticAttentionKeys(const SyntheticAttention& a, const std::string& prefix,
                                 gguf::Writer& w);

}  // namespace lockstep::model

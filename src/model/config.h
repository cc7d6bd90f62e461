// Model configuration derived from GGUF metadata and tensor presence, as plain data.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gguf/gguf.h"

namespace lockstep::model {

// Everything the forward pass needs to know about one layer. Model code branches on these
// fields only, never on a model's name.
struct LayerConfig {
  bool sliding = false;   // sliding-window attention (else full/global)
  int head_dim = 0;       // per-head width of Q, K and V
  int n_head = 0;         // query heads
  int n_head_kv = 0;      // key/value heads
  int n_rot = 0;          // rotated dims (NEOX pairs i, i + n_rot/2)
  float rope_base = 10000.0f;
  bool rope_freqs = false;  // divide angles by rope_freqs.weight (proportional RoPE)
  bool has_kv = true;       // computes and stores its own K/V
  int kv_source = 0;        // layer whose cache it attends over (itself when has_kv)
  bool v_from_k = false;    // no attn_v: V is the raw K projection (attention_k_eq_v)
  int n_ff = 0;             // dense (or shared) MLP width
  bool moe = false;         // routed experts beside the dense MLP
  bool output_scale = false;  // layer_output_scale.weight present
};

struct ModelConfig {
  std::string arch;  // general.architecture: "gemma4" or "gemma4-assistant"
  std::string name;  // general.name, informational only
  int n_embd = 0;
  int n_layer = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_swa = 0;                // sliding window, in positions including the query
  float rms_eps = 1e-6f;
  int n_embd_per_layer = 0;     // PLE width P; 0 = no per-layer embeddings
  int n_shared_kv_layers = 0;
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;
  float final_softcap = 0.0f;   // 0 = none
  bool tied_output = true;      // logits through token_embd (no output.weight)
  // Assistant drafter only.
  int n_embd_backbone = 0;      // target width (embedding_length_out)
  bool ordered_embeddings = false;  // centroid head present and enabled
  int n_centroids = 0;
  int centroid_top_k = 0;
  std::vector<LayerConfig> layers;

  bool is_assistant() const { return arch == "gemma4-assistant"; }
  // Last layer of each attention type that owns a KV cache (what a drafter reads).
  int last_kv_layer(bool sliding) const;
};

// Reads `<arch>.*` keys with llama.cpp's names. Errors name the file and key at fault.
Expected<ModelConfig> LoadConfig(const gguf::File& file);
nlohmann::json ConfigToJson(const ModelConfig& c);
// One line per layer, for `inspect`.
std::string ConfigToTable(const ModelConfig& c);

}  // namespace lockstep::model

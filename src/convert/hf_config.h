// The parts of a Hugging Face Gemma 4 config.json that GGUF conversion needs, validated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace lockstep::convert {

struct HfConfig {
  std::string model_type;     // gemma4, gemma4_text, gemma4_assistant or their gemma4_unified_*
  std::string arch;           // GGUF general.architecture: "gemma4" or "gemma4-assistant"
  std::string tensor_prefix;  // "model." or "model.language_model."
  bool assistant() const { return arch == "gemma4-assistant"; }
  // gemma4_unified (the 12B): the same text model without PLE/MoE keys, no softcap by default.
  bool unified = false;
  // A multimodal checkpoint (gemma4, gemma4_unified): vision/audio tensors are skipped.
  bool multimodal = false;

  int64_t vocab = 0, hidden = 0, n_layer = 0, n_head = 0, ctx = 0, sliding_window = 0;
  double rms_eps = 0;
  std::vector<bool> is_swa;        // per layer
  std::vector<int64_t> head_dim;   // per layer
  std::vector<int64_t> n_kv_head;  // per layer
  std::vector<int64_t> n_ff;       // per layer (double-wide MLP doubles the KV-shared ones)
  int64_t head_dim_swa = 0, head_dim_full = 0;
  int64_t n_kv_shared = 0;
  bool k_eq_v = false;
  int64_t ple_dim = 0, ple_vocab = 0;
  bool moe = false;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  double rope_theta_full = 1e6, rope_theta_swa = 1e4;
  std::string rope_type_full = "proportional";
  double partial_rotary_full = 1.0;
  std::optional<double> final_softcap;
  bool tie_embeddings = true;
  // gemma4_assistant only
  int64_t backbone_hidden = 0;
  bool use_ordered = false;
  int64_t num_centroids = 0, centroid_top_k = 0;

  bool has_kv(int64_t il) const { return il < n_layer - n_kv_shared; }
  // Number of leading rope_freqs entries equal to 1 (the rotated pairs of full layers).
  int64_t rope_rotated_pairs() const;
};

// `root` is config.json; `path` names it in errors ("…/config.json: missing key 'text_config.x'").
Expected<HfConfig> ParseHfConfig(const nlohmann::json& root, const std::string& path);

}  // namespace lockstep::convert

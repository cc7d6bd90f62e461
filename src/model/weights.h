// Weight handles of a Gemma 4 (or assistant) model, looked up by llama.cpp tensor name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace lockstep::model {

using backend::Weight;

struct LayerWeights {
  Weight attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm;
  Weight post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;
  Weight layer_output_scale;
  // MoE
  Weight ffn_gate_inp, ffn_gate_inp_scale, pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;
  Weight ffn_gate_up_exps, ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_down_exps_scale;
  // Per-layer embeddings
  Weight inp_gate, proj, post_norm;
};

struct ModelWeights {
  Weight token_embd, output, output_norm, rope_freqs;
  Weight per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm;
  // Assistant drafter
  Weight nextn_pre_projection, nextn_post_projection, centroids, token_ordering;
  std::vector<LayerWeights> layers;
};

// Binds every tensor the config says must exist, checking shapes; errors name the tensor.
Expected<ModelWeights> BindWeights(const gguf::File& file, const ModelConfig& config,
                                   backend::Backend& backend);

}  // namespace lockstep::model

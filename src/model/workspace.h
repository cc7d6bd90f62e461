// Everything a forward pass writes, allocated once: named activation buffers sized for the most
// rows a step may carry, and the step inputs (ids, positions, slots, output rows) in backend
// memory. A step views them at its own size, so decoding allocates nothing.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/config.h"

namespace lockstep::model {

// One buffer per named intermediate of a decoder layer (reused by every layer), plus the
// embedding, per-layer-input, head and drafter buffers. Widths are the largest any layer needs.
struct Activations {
  backend::Tensor inp_embd,
      layer_io[2];  // residual stream: layer il reads [il % 2], writes the other
  backend::Tensor attn_norm, q, k, v, attn, attn_proj, attn_out;
  backend::Tensor ffn_norm, ffn_gate, ffn_up, ffn_act, ffn_mlp;
  // Routed experts beside the shared MLP (MoE layers).
  backend::Tensor mlp_post_norm, router_in, router_logits, moe_in, moe_out, ffn_sum;
  // Per-layer embeddings.
  backend::Tensor per_layer_tok, per_layer_proj, per_layer_inp, ple_gate, ple_slice, ple_mixed,
      ple_proj;
  // Head: final norm of every row, then the output rows only.
  backend::Tensor result_norm, out_hidden, logits;
  // Assistant drafter: [target embedding; backbone hidden] in, h_next out.
  backend::Tensor draft_emb, draft_h, draft_inp, draft_x, draft_h_next, centroid_logits,
      draft_candidates;
};

// The step's rows in backend memory, uploaded once per forward.
struct StepInputs {
  backend::IntTensor tokens, pos, seq, out_rows, candidate_ids;
  int n_rows = 0, n_out = 0;
  backend::RowInfo rows() const { return {pos.first(n_rows), seq.first(n_rows)}; }
};

class Workspace {
 public:
  // max_rows: rows per forward; max_out: rows whose logits a forward returns.
  Workspace(backend::Backend& be, const ModelConfig& c, int max_rows, int max_out);
  // Copies the batch's ids, positions, slots and output-row list to the backend.
  void Upload(const Batch& batch);

  Activations act;
  StepInputs in;
  // Captured forward passes over these buffers (CUDA graphs), keyed by step shape.
  std::unique_ptr<backend::Replays> replays;
  // Host scratch for work that still runs on the host (the centroid head's top-k); reused, so
  // it stops allocating once it has grown to the step's size.
  std::vector<float> host_floats, host_logits;
  std::vector<int32_t> host_ids, host_order;

 private:
  backend::Backend* be_;
  int max_rows_, max_out_;
};

}  // namespace lockstep::model

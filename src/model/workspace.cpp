// Workspace allocation: every buffer once, at the widest any layer of the config needs.
#include "model/workspace.h"

#include <algorithm>

#include "core/check.h"

namespace lockstep::model {

Workspace::Workspace(backend::Backend& be, const ModelConfig& c, int max_rows, int max_out)
    : be_(&be), max_rows_(max_rows), max_out_(max_out) {
  CHECKF(max_rows > 0 && max_out > 0 && max_out <= max_rows, "workspace rows {} / outputs {}",
         max_rows, max_out);
  int64_t q_w = 0, kv_w = 0, ff = 0;
  for (const LayerConfig& l : c.layers) {
    q_w = std::max<int64_t>(q_w, static_cast<int64_t>(l.n_head) * l.head_dim);
    kv_w = std::max<int64_t>(kv_w, static_cast<int64_t>(l.n_head_kv) * l.head_dim);
    ff = std::max<int64_t>(ff, l.n_ff);
  }
  const int64_t R = max_rows, d = c.n_embd;
  auto rows = [&](int64_t cols) { return cols > 0 ? be.NewTensor(R, cols) : backend::Tensor(); };
  Activations& a = act;
  a.inp_embd = rows(d);
  a.layer_io[0] = rows(d);
  a.layer_io[1] = rows(d);
  a.attn_norm = rows(d);
  a.q = rows(q_w);
  a.k = rows(kv_w);
  a.v = rows(kv_w);
  a.attn = rows(q_w);
  a.attn_proj = rows(d);
  a.attn_out = rows(d);
  a.ffn_norm = rows(d);
  a.ffn_gate = rows(ff);
  a.ffn_up = rows(ff);
  a.ffn_act = rows(ff);
  a.ffn_mlp = rows(d);
  if (c.n_expert > 0) {
    a.mlp_post_norm = rows(d);
    a.router_in = rows(d);
    a.router_logits = rows(c.n_expert);
    a.moe_in = rows(d);
    a.moe_out = rows(d);
    a.ffn_sum = rows(d);
  }
  if (c.n_embd_per_layer > 0) {
    const int64_t P = c.n_embd_per_layer, PL = P * c.n_layer;
    a.per_layer_tok = rows(PL);
    a.per_layer_proj = rows(PL);
    a.per_layer_inp = rows(PL);
    a.ple_gate = rows(P);
    a.ple_slice = rows(P);
    a.ple_mixed = rows(P);
    a.ple_proj = rows(d);
  }
  a.result_norm = rows(d);
  a.out_hidden = be.NewTensor(max_out, d);
  a.logits = be.NewTensor(max_out, c.n_vocab);
  if (c.is_assistant()) {
    const int64_t bb = c.n_embd_backbone;
    a.draft_emb = rows(bb);
    a.draft_h = rows(bb);
    a.draft_inp = rows(2 * bb);
    a.draft_x = rows(d);
    a.draft_h_next = rows(bb);
    if (c.ordered_embeddings) {
      const int64_t n_cand = static_cast<int64_t>(c.centroid_top_k) * (c.n_vocab / c.n_centroids);
      a.centroid_logits = rows(c.n_centroids);
      a.draft_candidates = rows(n_cand);
      in.candidate_ids = be.NewIntTensor(R * n_cand);
    }
  }
  in.tokens = be.NewIntTensor(R);
  in.pos = be.NewIntTensor(R);
  in.seq = be.NewIntTensor(R);
  in.out_rows = be.NewIntTensor(max_out);
  replays = be.NewReplays();
}

void Workspace::Upload(const Batch& batch) {
  CHECKF(batch.size() <= max_rows_ && static_cast<int>(batch.out_rows.size()) <= max_out_,
         "step of {} rows ({} outputs) in a workspace for {} ({})", batch.size(),
         batch.out_rows.size(), max_rows_, max_out_);
  be_->Upload(batch.tokens, &in.tokens);
  be_->Upload(batch.pos, &in.pos);
  be_->Upload(batch.seq, &in.seq);
  be_->Upload(batch.out_rows, &in.out_rows);
  in.n_rows = batch.size();
  in.n_out = static_cast<int>(batch.out_rows.size());
}

}  // namespace lockstep::model

// Binds GGUF tensors to the model's weight slots with shape checks.
#include "model/weights.h"

#include <fmt/format.h>

namespace lockstep::model {
namespace {

class Binder {
 public:
  Binder(const gguf::File& f, backend::Backend& b) : f_(f), b_(b) {}

  // Binds `name` into `*w`. `shape` lists expected ne (-1 = any); required tensors must exist.
  Status Bind(Weight* w, const std::string& name, std::vector<int64_t> shape, bool required,
              backend::WeightUse use = backend::WeightUse::kMatMul) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (!t) {
      if (required) return Status::Errorf("{}: missing tensor '{}'", f_.path(), name);
      return Status::Ok();
    }
    bool match = t->ne.size() == shape.size();
    for (size_t i = 0; match && i < shape.size(); ++i) match = shape[i] < 0 || shape[i] == t->ne[i];
    if (!match) {
      std::string want, got;
      for (auto v : shape)
        want += (want.empty() ? "" : ", ") + (v < 0 ? std::string("*") : std::to_string(v));
      for (auto v : t->ne) got += (got.empty() ? "" : ", ") + std::to_string(v);
      return Status::Errorf("{}: tensor '{}' has shape {{{}}}, expected {{{}}}", f_.path(), name,
                            got, want);
    }
    Weight v;
    v.name = name;
    v.type = t->type;
    v.ne = t->ne;
    v.data = f_.TensorData(*t);
    v.row_bytes = RowBytes(t->type, t->ne[0]);
    v.use = use;
    *w = b_.PrepareWeight(std::move(v));
    return Status::Ok();
  }

 private:
  const gguf::File& f_;
  backend::Backend& b_;
};

// Expert tensors are read one expert at a time (MoeFfn), never as one matmul.
constexpr backend::WeightUse kExperts = backend::WeightUse::kExperts;

Status BindLayer(Binder& b, const ModelConfig& c, int il, LayerWeights* w) {
  const LayerConfig& l = c.layers[il];
  const int64_t d = c.n_embd, hd = l.head_dim;
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  LS_RETURN_IF_ERROR(b.Bind(&w->attn_norm, n("attn_norm.weight"), {d}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->attn_q, n("attn_q.weight"), {d, hd * l.n_head}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->attn_q_norm, n("attn_q_norm.weight"), {hd}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->attn_output, n("attn_output.weight"), {hd * l.n_head, d}, true));
  if (l.has_kv) {
    LS_RETURN_IF_ERROR(b.Bind(&w->attn_k, n("attn_k.weight"), {d, hd * l.n_head_kv}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->attn_k_norm, n("attn_k_norm.weight"), {hd}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->attn_v, n("attn_v.weight"), {d, hd * l.n_head_kv}, !l.v_from_k));
  }
  LS_RETURN_IF_ERROR(b.Bind(&w->post_attention_norm, n("post_attention_norm.weight"), {d}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->layer_output_scale, n("layer_output_scale.weight"), {1}, false));
  LS_RETURN_IF_ERROR(b.Bind(&w->ffn_norm, n("ffn_norm.weight"), {d}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->ffn_gate, n("ffn_gate.weight"), {d, l.n_ff}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->ffn_up, n("ffn_up.weight"), {d, l.n_ff}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->ffn_down, n("ffn_down.weight"), {l.n_ff, d}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w->post_ffw_norm, n("post_ffw_norm.weight"), {d}, true));
  if (l.moe) {
    const int64_t E = c.n_expert, F = c.n_ff_exp;
    LS_RETURN_IF_ERROR(b.Bind(&w->ffn_gate_inp, n("ffn_gate_inp.weight"), {d, E}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->ffn_gate_inp_scale, n("ffn_gate_inp.scale"), {d}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->pre_ffw_norm_2, n("pre_ffw_norm_2.weight"), {d}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->post_ffw_norm_1, n("post_ffw_norm_1.weight"), {d}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->post_ffw_norm_2, n("post_ffw_norm_2.weight"), {d}, true));
    LS_RETURN_IF_ERROR(
        b.Bind(&w->ffn_gate_up_exps, n("ffn_gate_up_exps.weight"), {d, 2 * F, E}, false, kExperts));
    const bool fused = static_cast<bool>(w->ffn_gate_up_exps);
    LS_RETURN_IF_ERROR(
        b.Bind(&w->ffn_gate_exps, n("ffn_gate_exps.weight"), {d, F, E}, !fused, kExperts));
    LS_RETURN_IF_ERROR(
        b.Bind(&w->ffn_up_exps, n("ffn_up_exps.weight"), {d, F, E}, !fused, kExperts));
    LS_RETURN_IF_ERROR(
        b.Bind(&w->ffn_down_exps, n("ffn_down_exps.weight"), {F, d, E}, true, kExperts));
    LS_RETURN_IF_ERROR(b.Bind(&w->ffn_down_exps_scale, n("ffn_down_exps.scale"), {E}, false));
  }
  if (c.n_embd_per_layer > 0) {
    const int64_t P = c.n_embd_per_layer;
    LS_RETURN_IF_ERROR(b.Bind(&w->inp_gate, n("inp_gate.weight"), {d, P}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->proj, n("proj.weight"), {P, d}, true));
    LS_RETURN_IF_ERROR(b.Bind(&w->post_norm, n("post_norm.weight"), {d}, true));
  }
  return Status::Ok();
}

}  // namespace

Expected<ModelWeights> BindWeights(const gguf::File& f, const ModelConfig& c,
                                   backend::Backend& backend) {
  Binder b(f, backend);
  ModelWeights w;
  const int64_t d = c.n_embd, V = c.n_vocab;
  LS_RETURN_IF_ERROR(b.Bind(&w.token_embd, "token_embd.weight", {d, V}, true));
  LS_RETURN_IF_ERROR(b.Bind(&w.output, "output.weight", {d, V}, false));
  LS_RETURN_IF_ERROR(b.Bind(&w.output_norm, "output_norm.weight", {d}, true));
  // Optional: without rope_freqs, full layers rotate all n_rot dims (plain NEOX).
  LS_RETURN_IF_ERROR(b.Bind(&w.rope_freqs, "rope_freqs.weight", {-1}, false));
  if (c.n_embd_per_layer > 0) {
    const int64_t PL = static_cast<int64_t>(c.n_embd_per_layer) * c.n_layer;
    LS_RETURN_IF_ERROR(b.Bind(&w.per_layer_token_embd, "per_layer_token_embd.weight", {PL, V}, true,
                              backend::WeightUse::kRows));
    LS_RETURN_IF_ERROR(
        b.Bind(&w.per_layer_model_proj, "per_layer_model_proj.weight", {d, PL}, true));
    LS_RETURN_IF_ERROR(
        b.Bind(&w.per_layer_proj_norm, "per_layer_proj_norm.weight", {c.n_embd_per_layer}, true));
  }
  if (c.is_assistant()) {
    const int64_t bb = c.n_embd_backbone;
    LS_RETURN_IF_ERROR(
        b.Bind(&w.nextn_pre_projection, "nextn.pre_projection.weight", {2 * bb, d}, true));
    LS_RETURN_IF_ERROR(
        b.Bind(&w.nextn_post_projection, "nextn.post_projection.weight", {d, bb}, true));
    if (c.ordered_embeddings) {
      LS_RETURN_IF_ERROR(
          b.Bind(&w.centroids, "masked_embd_centroids.weight", {d, c.n_centroids}, true));
      LS_RETURN_IF_ERROR(b.Bind(&w.token_ordering, "masked_embd_ordering", {V}, true));
    }
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) LS_RETURN_IF_ERROR(BindLayer(b, c, il, &w.layers[il]));
  return w;
}

}  // namespace lockstep::model
